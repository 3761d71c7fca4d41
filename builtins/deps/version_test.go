// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestCompareDebian(t *testing.T) {
	// Each pair is a < b, as dpkg --compare-versions a lt b answers.
	for _, tc := range [][2]string{
		{"17.6-9", "17.6-10"},
		{"17.6-0+deb13u1", "17.6-0+deb13u2"},
		{"17.6-0+deb13u9", "17.6-0+deb13u10"},
		{"17.6-1", "17.10-1"},
		{"1.0~rc1", "1.0"},
		{"1.0~rc1-1", "1.0-1"},
		{"1.0~~", "1.0~"},
		{"1.0", "1.0a"},
		{"1.0a", "1.0+"},
		{"1.0", "1.0.1"},
		{"9:1.0", "10:0.1"},
		{"1.0-1", "1:0.9-1"},
		{"2.0", "10.0"},
		{"1.01", "1.2"},
		{"4.1.12-6.12.30+deb13-cloud-amd64", "4.1.12-6.12.41+deb13-cloud-amd64"},
		{"20250101.0", "20250211.0"},
	} {
		if CompareDebian(tc[0], tc[1]) >= 0 || CompareDebian(tc[1], tc[0]) <= 0 {
			t.Errorf("%s < %s: got %d and %d", tc[0], tc[1], CompareDebian(tc[0], tc[1]), CompareDebian(tc[1], tc[0]))
		}
	}
	for _, tc := range [][2]string{{"1.0", "1.0"}, {"1.01", "1.1"}, {"0:1.0-1", "1.0-1"}, {"1.0-0", "1.0-"}} {
		if CompareDebian(tc[0], tc[1]) != 0 {
			t.Errorf("%s = %s: got %d", tc[0], tc[1], CompareDebian(tc[0], tc[1]))
		}
	}
	got := []string{"17.6-10", "17.6-9", "17.6-1", "17.5-20", "17.6~beta-1"}
	slices.SortFunc(got, CompareDebian)
	if want := []string{"17.5-20", "17.6~beta-1", "17.6-1", "17.6-9", "17.6-10"}; !slices.Equal(got, want) {
		t.Fatalf("sorted %v, want %v", got, want)
	}
}

func FuzzCompareDebian(f *testing.F) {
	for _, s := range []string{"1.0", "1:2.0-3", "1.0~rc1", "17.6-0+deb13u1", "", "-", ":", "~~"} {
		f.Add(s, s+"1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if x, y := CompareDebian(a, b), CompareDebian(b, a); x != -y {
			t.Fatalf("CompareDebian(%q, %q) = %d but reversed %d", a, b, x, y)
		}
		if CompareDebian(a, a) != 0 {
			t.Fatalf("%q is not equal to itself", a)
		}
	})
}

// The resolver takes the greatest version by Debian's rules: revision 10
// follows revision 9 (as strings, "-10" sorts first).
func TestResolveDebianOrdersRevisions(t *testing.T) {
	var index bytes.Buffer
	zw := gzip.NewWriter(&index)
	for _, v := range []string{"17.6-9", "17.6-10", "17.6-2", "17.5-30"} {
		fmt.Fprintf(zw, "Package: libpq5\nVersion: %s\nArchitecture: amd64\nFilename: pool/main/p/postgresql-17/libpq5_%s_amd64.deb\nSize: 10\nSHA256: %s\n\n",
			v, v, strings.Repeat("a", 64))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debian/dists/trixie/main/binary-amd64/Packages.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(index.Bytes())
	}))
	t.Cleanup(srv.Close)
	d, ok := Lookup("libpq5")
	if !ok {
		t.Fatal("no libpq5 definition")
	}
	r := &Resolver{Client: srv.Client(), Hosts: map[DownloadHost]string{DebianHost: srv.URL}}
	files, err := r.Resolve(t.Context(), d, []Arch{AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if files[0].Version != "17.6-10" || !strings.HasSuffix(files[0].URL, "libpq5_17.6-10_amd64.deb") {
		t.Fatalf("resolved %+v, want 17.6-10", files[0])
	}
}
