// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package upstreamtest

import (
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// testdataDir is the deps package's testdata directory.
func testdataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata") + string(filepath.Separator)
}

// Upstream serves the release listings recorded in deps/testdata and
// synthetic release files whose published digests are computed from their
// bodies, so every digest the resolver sees is genuine. It counts the
// requests per path and the release files downloaded.
type Upstream struct {
	Server *httptest.Server
	// Repos maps owner/name to a recorded listing file; set entries
	// before the first request.
	Repos map[string]string

	mu        sync.Mutex
	corrupt   map[string]bool
	requests  map[string]int
	downloads int
}

var placeholder = regexp.MustCompile(`\{\{(BASE|SHA256 [^}]+|SHA512 [^}]+|SIZE [^}]+)\}\}`)

// New starts the server; it stops when the test ends.
func New(t testing.TB) *Upstream {
	u := &Upstream{
		Repos: map[string]string{
			"containerd/containerd":       "containerd.json",
			"containernetworking/plugins": "plugins.json",
			"coredns/coredns":             "coredns.json",
			"kubernetes/kubernetes":       "kubernetes.json",
			"kubernetes-sigs/cri-tools":   "cri-tools.json",
			"google/gvisor":               "gvisor.json",
			"podplane/jool-builds":        "jool-builds.json",
		},
		corrupt:  map[string]bool{},
		requests: map[string]int{},
	}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Server.Close)
	return u
}

// Body is the genuine content of a release file path or name.
func Body(name string) []byte {
	name = strings.TrimPrefix(name, "/dl/")
	if name == "SHA512SUMS" {
		var b strings.Builder
		for _, a := range []string{"amd64", "arm64"} {
			n := "podmin-agent-linux-" + a
			fmt.Fprintf(&b, "%s  %s\n", Digest("sha512", Body(n)), n)
		}
		return []byte(b.String())
	}
	for _, ext := range []string{".sha256sum", ".sha256", ".sha512"} {
		if base, ok := strings.CutSuffix(name, ext); ok {
			alg := strings.TrimSuffix(strings.TrimPrefix(ext, "."), "sum")
			return []byte(Digest(alg, Body(base)) + "  " + path.Base(base) + "\n")
		}
	}
	return []byte("release file " + name + "\n")
}

// Digest is the hex sha256 or sha512 digest of b.
func Digest(alg string, b []byte) string {
	if alg == "sha512" {
		s := sha512.Sum512(b)
		return hex.EncodeToString(s[:])
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Corrupt makes u serve bytes other than those digested for the release
// file name.
func (u *Upstream) Corrupt(name string) {
	u.mu.Lock()
	u.corrupt[name] = true
	u.mu.Unlock()
}

// Served is the body u serves for a release file path, corrupted or not.
func (u *Upstream) Served(p string) []byte {
	name := strings.TrimPrefix(p, "/dl/")
	u.mu.Lock()
	bad := u.corrupt[name]
	u.mu.Unlock()
	if bad {
		return []byte("tampered " + name + "\n")
	}
	return Body(p)
}

// Requests is the number of requests served for path p.
func (u *Upstream) Requests(p string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests[p]
}

// RequestCounts is a copy of the number of requests served per path.
func (u *Upstream) RequestCounts() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := make(map[string]int, len(u.requests))
	for p, n := range u.requests {
		m[p] = n
	}
	return m
}

// Total is the number of requests served.
func (u *Upstream) Total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.requests {
		n += c
	}
	return n
}

// Downloaded counts the release files served (digest sidecars aside).
func (u *Upstream) Downloaded() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.downloads
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	testdata := testdataDir()
	p := r.URL.Path
	u.mu.Lock()
	u.requests[p]++
	u.mu.Unlock()
	switch {
	case strings.HasPrefix(p, "/api/repos/"):
		rest := strings.TrimPrefix(p, "/api/repos/")
		var file string
		if repo, tag, ok := strings.Cut(rest, "/releases/tags/"); ok {
			file = path.Base(repo) + "-" + tag + ".json"
		} else if repo, ok := strings.CutSuffix(rest, "/releases"); ok {
			if r.URL.Query().Get("page") != "1" {
				fmt.Fprint(w, "[]")
				return
			}
			file = u.Repos[repo]
		}
		data, err := os.ReadFile(testdata + "github/" + file)
		if file == "" || err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, u.expand(string(data)))
	case strings.HasSuffix(p, "/Packages.gz"), strings.HasSuffix(p, "/Packages"):
		repo := "libpq5"
		if strings.HasPrefix(p, "/fluentbit/") {
			repo = "fluent-bit"
		}
		data, err := os.ReadFile(testdata + "debian/" + repo + ".Packages")
		if err != nil {
			http.NotFound(w, r)
			return
		}
		arch := strings.TrimPrefix(path.Base(path.Dir(p)), "binary-")
		text := u.expand(strings.ReplaceAll(string(data), "{{ARCH}}", arch))
		if strings.HasSuffix(p, ".gz") {
			zw := gzip.NewWriter(w)
			_, _ = zw.Write([]byte(text))
			_ = zw.Close()
			return
		}
		fmt.Fprint(w, text)
	case strings.HasPrefix(p, "/images/"):
		http.ServeFile(w, r, testdata+"debian/image-manifest.json")
	case strings.HasPrefix(p, "/podmin/v"):
		// A Podmin release as make release lays it out (the mirror's
		// podmin/ folder): the agents and SHA512SUMS of any version.
		name := path.Base(p)
		if name != "SHA512SUMS" && !strings.HasPrefix(name, "podmin-agent-linux-") {
			http.NotFound(w, r)
			return
		}
		if name != "SHA512SUMS" {
			u.mu.Lock()
			u.downloads++
			u.mu.Unlock()
		}
		_, _ = w.Write(u.Served(name))
	case strings.HasPrefix(p, "/dl/"), strings.HasPrefix(p, "/k8s/"), strings.HasPrefix(p, "/gvisor/"),
		strings.HasPrefix(p, "/fluentbit/"), strings.HasPrefix(p, "/debian/"):
		if !strings.HasSuffix(p, ".sha256") && !strings.HasSuffix(p, ".sha512") && !strings.HasSuffix(p, ".sha256sum") && !strings.HasSuffix(p, "SUMS") {
			u.mu.Lock()
			u.downloads++
			u.mu.Unlock()
		}
		_, _ = w.Write(u.Served(p))
	default:
		http.NotFound(w, r)
	}
}

// expand fills the placeholders of a recorded response.
func (u *Upstream) expand(data string) string {
	return placeholder.ReplaceAllStringFunc(data, func(m string) string {
		m = strings.Trim(m, "{}")
		switch {
		case m == "BASE":
			return u.Server.URL
		case strings.HasPrefix(m, "SHA256 "):
			return Digest("sha256", Body(strings.TrimPrefix(m, "SHA256 ")))
		case strings.HasPrefix(m, "SHA512 "):
			return Digest("sha512", Body(strings.TrimPrefix(m, "SHA512 ")))
		default:
			return fmt.Sprint(len(u.Served(strings.TrimPrefix(m, "SIZE "))))
		}
	})
}
