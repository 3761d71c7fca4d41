// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package depstest serves the upstream release APIs recorded in the deps
// package's testdata over httptest, for tests outside that package that
// run the real dependency step (setup, its dry run).
package depstest

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
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

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/internal/objstore"
)

// testdataDir is the deps package's testdata directory.
func testdataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata") + string(filepath.Separator)
}

// Resolver returns a resolver asking u for every release, for agent
// version 1.4.0.
func (u *Upstream) Resolver() *deps.Resolver {
	return &deps.Resolver{Client: u.Server.Client(), GitHubAPI: u.Server.URL + "/api", AgentVersion: "1.4.0",
		Hosts: map[deps.DownloadHost]string{deps.KubernetesHost: u.Server.URL + "/k8s", deps.GVisorHost: u.Server.URL + "/gvisor",
			deps.FluentBitHost: u.Server.URL + "/fluentbit", deps.DebianHost: u.Server.URL + "/debian"}}
}

// ImageManifestURL maps an official Debian AMI name to u's copy of the
// recorded image manifest (kernel 6.12.41+deb13-cloud-amd64).
func (u *Upstream) ImageManifestURL(name string) (string, error) {
	if !strings.HasPrefix(name, "debian-13-") {
		return "", fmt.Errorf("AMI %q is not an official Debian 13 image", name)
	}
	return u.Server.URL + "/images/" + name + ".json", nil
}

// Upstream serves the release listings recorded in
// deps/testdata and synthetic release files whose published digests are
// computed from their bodies, so every digest the resolver sees is
// genuine. It counts the release files downloaded.
type Upstream struct {
	Server    *httptest.Server
	mu        sync.Mutex
	downloads int
}

var placeholder = regexp.MustCompile(`\{\{(BASE|SHA256 [^}]+|SHA512 [^}]+|SIZE [^}]+)\}\}`)

// NewUpstream starts the server; it stops when the test ends.
func NewUpstream(t testing.TB) *Upstream {
	u := &Upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Server.Close)
	return u
}

// Body is the content served for a release file path or name.
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
			return fmt.Sprint(len(Body(strings.TrimPrefix(m, "SIZE "))))
		}
	})
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	testdata := testdataDir()
	p := r.URL.Path
	repos := map[string]string{
		"containerd/containerd": "containerd.json", "containernetworking/plugins": "plugins.json",
		"coredns/coredns": "coredns.json", "kubernetes/kubernetes": "kubernetes.json",
		"kubernetes-sigs/cri-tools": "cri-tools.json", "google/gvisor": "gvisor.json",
		"podplane/jool-builds": "jool-builds.json",
	}
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
			file = repos[repo]
		}
		data, err := os.ReadFile(testdata + "github/" + file)
		if file == "" || err != nil {
			http.NotFound(w, r)
			return
		}
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
	case strings.HasPrefix(p, "/dl/"), strings.HasPrefix(p, "/k8s/"), strings.HasPrefix(p, "/gvisor/"),
		strings.HasPrefix(p, "/fluentbit/"), strings.HasPrefix(p, "/debian/"):
		if !strings.HasSuffix(p, ".sha256") && !strings.HasSuffix(p, ".sha512") && !strings.HasSuffix(p, ".sha256sum") && !strings.HasSuffix(p, "SUMS") {
			u.mu.Lock()
			u.downloads++
			u.mu.Unlock()
		}
		_, _ = w.Write(Body(p))
	default:
		http.NotFound(w, r)
	}
}

// Downloaded counts the release files served (digest sidecars aside).
func (u *Upstream) Downloaded() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.downloads
}

// MirrorImage records the mirrored images in the bucket without a
// registry; CheckImage finds them again there.
func MirrorImage(ctx context.Context, store objstore.Store, img deps.Image) (deps.ImageEntry, error) {
	body := []byte(`{"schemaVersion":2}`)
	if _, err := store.Put(ctx, img.Path()+"/index.json", body); err != nil {
		return deps.ImageEntry{}, err
	}
	return deps.ImageEntry{Version: img.Version, Source: img.Source(), Path: img.Path(),
		Digest: "sha256:" + Digest("sha256", body), Size: int64(len(body))}, nil
}

func CheckImage(ctx context.Context, store objstore.Store, img deps.Image, _ deps.ImageEntry) error {
	if _, err := store.Head(ctx, img.Path()+"/index.json"); errors.Is(err, objstore.ErrNotFound) {
		return deps.ErrImageMissing
	} else if err != nil {
		return err
	}
	return nil
}
