// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func def(t *testing.T, key string) Dependency {
	t.Helper()
	for _, d := range Definitions {
		if d.Key == key {
			return d
		}
	}
	t.Fatalf("no dependency %q", key)
	return Dependency{}
}

func TestResolveGreatestStableOfPinnedMajor(t *testing.T) {
	u := newFakeUpstream(t)
	files, err := u.resolver().Resolve(context.Background(), def(t, "containerd"), Archs)
	if err != nil {
		t.Fatal(err)
	}
	// v3.0.0 is another major, v2.2.0-rc.1 and v2.2.0-beta.0 are
	// prereleases, v2.1.9 a draft; v2.1.10 beats v2.1.4 as a version, not
	// as a string.
	want := []File{
		{Key: "containerd", Arch: AMD64, Canonical: "containerd.tar.gz", Version: "2.1.10",
			URL:    u.Server.URL + "/dl/containerd-2.1.10-linux-amd64.tar.gz",
			Path:   "dependencies/containerd/containerd-v2.1.10-linux-amd64.tar.gz",
			Digest: "sha256:" + sum("sha256", content("containerd-2.1.10-linux-amd64.tar.gz")),
			Size:   int64(len(content("containerd-2.1.10-linux-amd64.tar.gz")))},
		{Key: "containerd", Arch: ARM64, Canonical: "containerd.tar.gz", Version: "2.1.10",
			URL:    u.Server.URL + "/dl/containerd-2.1.10-linux-arm64.tar.gz",
			Path:   "dependencies/containerd/containerd-v2.1.10-linux-arm64.tar.gz",
			Digest: "sha256:" + sum("sha256", content("containerd-2.1.10-linux-arm64.tar.gz")),
			Size:   int64(len(content("containerd-2.1.10-linux-arm64.tar.gz")))},
	}
	if len(files) != 2 || files[0] != want[0] || files[1] != want[1] {
		t.Fatalf("got\n%+v\nwant\n%+v", files, want)
	}
}

func TestResolvePrefersSHA512(t *testing.T) {
	u := newFakeUpstream(t)
	files, err := u.resolver().Resolve(context.Background(), def(t, "cni-plugins"), []Arch{ARM64})
	if err != nil {
		t.Fatal(err)
	}
	want := "sha512:" + sum("sha512", content("cni-plugins-linux-arm64-v1.8.0.tgz"))
	if files[0].Digest != want {
		t.Fatalf("digest %s, want the published SHA-512 %s", files[0].Digest, want)
	}
	if files[0].Path != "dependencies/cni-plugins/cni-plugins-v1.8.0-linux-arm64.tgz" {
		t.Fatalf("path %s", files[0].Path)
	}
}

func TestResolvePublishedSHA512IsRequired(t *testing.T) {
	u := newFakeUpstream(t)
	// The publisher lists a .sha512 asset but serving it fails: the
	// resolver must not settle for the SHA-256 beside it.
	u.Repos["containernetworking/plugins"] = "plugins.json"
	r := u.resolver()
	orig := u.Server.Config.Handler
	u.Server.Config.Handler = httpFunc(func(w httpW, req httpR) {
		if filepath.Ext(req.URL.Path) == ".sha512" {
			httpError(w, 500)
			return
		}
		orig.ServeHTTP(w, req)
	})
	_, err := r.Resolve(context.Background(), def(t, "cni-plugins"), []Arch{AMD64})
	if err == nil || !strings.Contains(err.Error(), "read sha512 digest") {
		t.Fatalf("err = %v: must fail on the published SHA-512, not settle for SHA-256", err)
	}
}

func TestResolveMissingDigests(t *testing.T) {
	u := newFakeUpstream(t)
	// No sidecar for amd64: GitHub's asset SHA-256 is kept. In the second
	// recording arm64 has no digest at all and is refused.
	files, err := u.resolver().Resolve(context.Background(), def(t, "coredns"), []Arch{AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha256:" + sum("sha256", content("coredns_1.12.3_linux_amd64.tgz")); files[0].Digest != want {
		t.Fatalf("digest %s, want %s", files[0].Digest, want)
	}
	u.Repos["coredns/coredns"] = "coredns-nodigest.json"
	_, err = u.resolver().Resolve(context.Background(), def(t, "coredns"), []Arch{ARM64})
	if !errors.Is(err, ErrNoDigest) {
		t.Fatalf("err = %v, want ErrNoDigest", err)
	}
}

func TestResolveMinorPinAndOffGitHubHosts(t *testing.T) {
	u := newFakeUpstream(t)
	r := u.resolver()
	files, err := r.Resolve(context.Background(), def(t, "kubelet"), []Arch{ARM64})
	if err != nil {
		t.Fatal(err)
	}
	f := files[0]
	if f.Version != "1.36.2" || f.URL != u.Server.URL+"/k8s/release/v1.36.2/bin/linux/arm64/kubelet" ||
		f.Path != "dependencies/kubelet/kubelet-v1.36.2-linux-arm64" ||
		f.Digest != "sha512:"+sum("sha512", content("/k8s/release/v1.36.2/bin/linux/arm64/kubelet")) {
		t.Fatalf("kubelet %+v", f)
	}
	files, err = r.Resolve(context.Background(), def(t, "crictl"), []Arch{AMD64})
	if err != nil || files[0].Version != "1.36.0" {
		t.Fatalf("crictl %+v %v: must match kubelet's minor", files, err)
	}
	files, err = r.Resolve(context.Background(), def(t, "gvisor"), []Arch{AMD64})
	if err != nil {
		t.Fatal(err)
	}
	if f := files[0]; f.Version != "20260803.0" || f.URL != u.Server.URL+"/gvisor/releases/release/20260803.0/x86_64/gvisor.tar.bz2" ||
		f.Path != "dependencies/gvisor/gvisor-v20260803.0-linux-amd64.tar.bz2" || f.Digest[:7] != "sha512:" {
		t.Fatalf("gvisor %+v", f)
	}
}

func TestResolveAgentMatchesCLIVersion(t *testing.T) {
	u := newFakeUpstream(t)
	r := u.resolver()
	files, err := r.Resolve(context.Background(), def(t, "podmin-agent"), Archs)
	if err != nil {
		t.Fatal(err)
	}
	if files[1].Version != "1.4.0" || files[1].Digest != "sha512:"+sum("sha512", content("podmin-agent-linux-arm64")) ||
		files[1].Path != "dependencies/podmin-agent/podmin-agent-v1.4.0-linux-arm64" {
		t.Fatalf("agent %+v", files[1])
	}
	r.AgentVersion = "dev"
	if _, err := r.Resolve(context.Background(), def(t, "podmin-agent"), Archs); err == nil {
		t.Fatal("a development CLI resolved a published agent")
	}
}

func TestResolveNoRelease(t *testing.T) {
	u := newFakeUpstream(t)
	d := def(t, "containerd")
	d.Pin = "v9"
	if _, err := u.resolver().Resolve(context.Background(), d, Archs); !errors.Is(err, ErrNoRelease) {
		t.Fatalf("err = %v, want ErrNoRelease", err)
	}
}

func TestMatchesPin(t *testing.T) {
	for _, c := range []struct {
		v, pin string
		ok     bool
	}{
		{"v2.1.4", "v2", true}, {"v3.0.0", "v2", false}, {"v2.2.0-rc.1", "v2", false},
		{"v1.36.2", "v1.36", true}, {"v1.37.0", "v1.36", false}, {"v20260803.0", "", true},
		{"vbogus", "", false},
	} {
		if got := MatchesPin(c.v, c.pin); got != c.ok {
			t.Errorf("MatchesPin(%q, %q) = %v", c.v, c.pin, got)
		}
	}
}

func TestDownloadVerifiesAndCaches(t *testing.T) {
	u := newFakeUpstream(t)
	files, err := u.resolver().Resolve(context.Background(), def(t, "cni-plugins"), Archs)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{Dir: t.TempDir(), Client: u.Server.Client()}
	got, err := c.EnsureAll(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		b, err := os.ReadFile(c.Path(f))
		if err != nil || string(b) != string(content(filepath.Base(f.URL))) || f.Size != int64(len(b)) {
			t.Fatalf("cached %s: %q %v", f.Path, b, err)
		}
	}
	before := u.Requests("/dl/cni-plugins-linux-amd64-v1.8.0.tgz")
	if _, err := c.Ensure(context.Background(), files[0]); err != nil {
		t.Fatal(err)
	}
	if after := u.Requests("/dl/cni-plugins-linux-amd64-v1.8.0.tgz"); after != before {
		t.Fatalf("a valid cached file was downloaded again (%d → %d requests)", before, after)
	}
	// A corrupt cached copy is replaced.
	os.WriteFile(c.Path(files[0]), []byte("rot"), 0o644)
	if _, err := c.Ensure(context.Background(), files[0]); err != nil {
		t.Fatal(err)
	}
	if n, ok := c.Check(files[0]); !ok || n == 3 {
		t.Fatal("corrupt cached file was not replaced")
	}
}

// TestCacheRefusesSameSizeCorruption: a cached file whose size is right
// but whose bytes are not is neither vouched for by Check nor reused by
// Ensure; only the digest can tell.
func TestCacheRefusesSameSizeCorruption(t *testing.T) {
	u := newFakeUpstream(t)
	files, err := u.resolver().Resolve(context.Background(), def(t, "cni-plugins"), Archs)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{Dir: t.TempDir(), Client: u.Server.Client()}
	f, err := c.Ensure(context.Background(), files[0])
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(c.Path(f))
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte(string(good))
	bad[len(bad)/2] ^= 0xff
	if err := os.WriteFile(c.Path(f), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if n, ok := c.Check(f); ok {
		t.Fatalf("Check vouched for a same-size corrupt copy (%d bytes)", n)
	}
	url := "/dl/" + filepath.Base(f.URL)
	before := u.Requests(url)
	if _, err := c.Ensure(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if after := u.Requests(url); after != before+1 {
		t.Fatalf("a same-size corrupt copy was reused: %d → %d downloads", before, after)
	}
	if got, err := os.ReadFile(c.Path(f)); err != nil || string(got) != string(good) {
		t.Fatalf("cached copy after Ensure: %v, content restored %v", err, string(got) == string(good))
	}
}

func TestDownloadDigestMismatchRefusedAndRemoved(t *testing.T) {
	u := newFakeUpstream(t)
	files, err := u.resolver().Resolve(context.Background(), def(t, "crictl"), []Arch{AMD64})
	if err != nil {
		t.Fatal(err)
	}
	u.Corrupt("crictl-v1.36.0-linux-amd64.tar.gz")
	files[0].Size = 0 // size unknown: only the digest can catch it
	c := &Cache{Dir: t.TempDir(), Client: u.Server.Client()}
	if _, err := c.Ensure(context.Background(), files[0]); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err = %v, want ErrDigestMismatch", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(c.Path(files[0])))
	if len(entries) != 0 {
		t.Fatalf("a refused download left %d files behind: %v", len(entries), entries[0].Name())
	}
}

func TestResolveDebianPackages(t *testing.T) {
	u := newFakeUpstream(t)
	r := u.resolver()
	r.Hosts[FluentBitHost] = u.Server.URL + "/fluentbit"
	r.Hosts[DebianHost] = u.Server.URL + "/debian"
	files, err := r.Resolve(context.Background(), def(t, "fluent-bit"), Archs)
	if err != nil {
		t.Fatal(err)
	}
	// 6.0.0 is another major, 5.1.0~rc1 a prerelease, fluent-bit-dbg
	// another package; the index's SHA-512 wins over its SHA-256.
	pool := "/fluentbit/debian/trixie/pool/main/f/fluent-bit/fluent-bit_5.0.1_arm64.deb"
	if f := files[1]; f.Version != "5.0.1" || f.URL != u.Server.URL+pool || f.Digest != "sha512:"+sum("sha512", content(pool)) ||
		f.Size != int64(len(content(pool))) || f.Path != "dependencies/fluent-bit/fluent-bit-v5.0.1-linux-arm64.deb" {
		t.Fatalf("fluent-bit %+v", f)
	}
	files, err = r.Resolve(context.Background(), def(t, "libpq5"), []Arch{AMD64})
	if err != nil {
		t.Fatal(err)
	}
	pool = "/debian/debian/pool/main/p/postgresql-17/libpq5_17.6-0+deb13u1_amd64.deb"
	if f := files[0]; f.Version != "17.6-0+deb13u1" || f.Digest != "sha256:"+sum("sha256", content(pool)) ||
		f.Path != "dependencies/libpq5/libpq5-v17.6-0+deb13u1-linux-amd64.deb" {
		t.Fatalf("libpq5 %+v", f)
	}
	c := &Cache{Dir: t.TempDir(), Client: u.Server.Client()}
	if _, err := c.Ensure(context.Background(), files[0]); err != nil {
		t.Fatal(err)
	}
}

func TestImageKernel(t *testing.T) {
	u := newFakeUpstream(t)
	k, err := u.resolver().ImageKernel(context.Background(), u.Server.URL+"/images/debian-13-generic-amd64.json")
	if err != nil || k != "6.12.41+deb13-cloud-amd64" {
		t.Fatalf("kernel %q %v", k, err)
	}
	r := u.resolver()
	r.Kernels = map[Arch]string{AMD64: k}
	files, err := r.Resolve(context.Background(), def(t, "jool"), []Arch{AMD64})
	if err != nil {
		t.Fatal(err)
	}
	name := "jool-4.1.14-6.12.41+deb13-cloud-amd64.tar.gz"
	if f := files[0]; f.Path != "dependencies/jool/jool-v4.1.14-6.12.41+deb13-cloud-amd64-linux-amd64.tar.gz" ||
		f.Digest != "sha256:"+sum("sha256", content(name)) || f.Version != "4.1.14" {
		t.Fatalf("jool %+v", f)
	}
	if n, ok := ParseObjectPath(files[0].Path); !ok || n.Arch != AMD64 || n.Version != "4.1.14-"+k {
		t.Fatalf("object name %+v", n)
	}
	if _, err := r.Resolve(context.Background(), def(t, "jool"), []Arch{ARM64}); err == nil || !strings.Contains(err.Error(), "no kernel known") {
		t.Fatalf("err = %v: Jool needs the AMI's kernel", err)
	}
}
