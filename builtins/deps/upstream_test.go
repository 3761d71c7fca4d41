// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

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
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeUpstream serves the recorded release listings in testdata/github
// and synthetic release files whose sidecar digests are computed from
// their content, so every digest in a listing is genuine.
type fakeUpstream struct {
	srv *httptest.Server
	// repos maps owner/name to a recorded listing file.
	repos map[string]string
	mu    sync.Mutex
	// corrupt names files served with bytes other than those digested.
	corrupt map[string]bool
	// truncate names files whose body is cut off mid-stream.
	requests map[string]int
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	u := &fakeUpstream{
		repos: map[string]string{
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
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *fakeUpstream) resolver() *Resolver {
	return &Resolver{
		Client:       u.srv.Client(),
		GitHubAPI:    u.srv.URL + "/api",
		Hosts:        map[DownloadHost]string{KubernetesHost: u.srv.URL + "/k8s", GVisorHost: u.srv.URL + "/gvisor"},
		AgentVersion: "1.4.0",
	}
}

// content is the synthetic body of a release file.
func content(name string) []byte { return []byte("release file " + name + "\n") }

func sum(alg string, b []byte) string {
	if alg == "sha512" {
		s := sha512.Sum512(b)
		return hex.EncodeToString(s[:])
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var placeholder = regexp.MustCompile(`\{\{(BASE|SHA256 [^}]+|SHA512 [^}]+|SIZE [^}]+)\}\}`)

func (u *fakeUpstream) count(p string) {
	u.mu.Lock()
	u.requests[p]++
	u.mu.Unlock()
}

func (u *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	u.count(p)
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
			file = u.repos[repo]
		}
		data, err := os.ReadFile("testdata/github/" + file)
		if file == "" || err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, u.expand(string(data)))
	case strings.HasSuffix(p, "/Packages"), strings.HasSuffix(p, "/Packages.gz"):
		u.servePackages(w, r)
	case p == "/images/debian-13-generic-amd64.json":
		http.ServeFile(w, r, "testdata/debian/image-manifest.json")
	case strings.HasPrefix(p, "/dl/"), strings.HasPrefix(p, "/k8s/"), strings.HasPrefix(p, "/gvisor/"),
		strings.HasPrefix(p, "/fluentbit/"), strings.HasPrefix(p, "/debian/"):
		w.Write(u.body(p))
	default:
		http.NotFound(w, r)
	}
}

// expand fills the placeholders of a recorded response.
func (u *fakeUpstream) expand(data string) string {
	return placeholder.ReplaceAllStringFunc(data, func(m string) string {
		m = strings.Trim(m, "{}")
		switch {
		case m == "BASE":
			return u.srv.URL
		case strings.HasPrefix(m, "SHA256 "):
			return sum("sha256", content(strings.TrimPrefix(m, "SHA256 ")))
		case strings.HasPrefix(m, "SHA512 "):
			return sum("sha512", content(strings.TrimPrefix(m, "SHA512 ")))
		default:
			return fmt.Sprint(len(u.body(strings.TrimPrefix(m, "SIZE "))))
		}
	})
}

// servePackages serves a recorded Packages index for the architecture in
// the path ("binary-<arch>"), gzipped for Packages.gz.
func (u *fakeUpstream) servePackages(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	repo := "libpq5"
	if strings.HasPrefix(p, "/fluentbit/") {
		repo = "fluent-bit"
	}
	data, err := os.ReadFile("testdata/debian/" + repo + ".Packages")
	if err != nil {
		http.NotFound(w, r)
		return
	}
	arch := strings.TrimPrefix(path.Base(path.Dir(p)), "binary-")
	text := u.expand(strings.ReplaceAll(string(data), "{{ARCH}}", arch))
	if strings.HasSuffix(p, ".gz") {
		zw := gzip.NewWriter(w)
		zw.Write([]byte(text))
		zw.Close()
		return
	}
	fmt.Fprint(w, text)
}

// body returns the bytes served for a file path or name.
func (u *fakeUpstream) body(p string) []byte {
	name := strings.TrimPrefix(p, "/dl/")
	if name == "SHA512SUMS" {
		var b strings.Builder
		for _, a := range []string{"amd64", "arm64"} {
			n := "podmin-agent-linux-" + a
			fmt.Fprintf(&b, "%s  %s\n", sum("sha512", content(n)), n)
		}
		return []byte(b.String())
	}
	for _, ext := range []string{".sha256sum", ".sha256", ".sha512"} {
		if base, ok := strings.CutSuffix(name, ext); ok {
			alg := strings.TrimSuffix(strings.TrimPrefix(ext, "."), "sum")
			return []byte(sum(alg, content(base)) + "  " + path.Base(base) + "\n")
		}
	}
	u.mu.Lock()
	bad := u.corrupt[name]
	u.mu.Unlock()
	if bad {
		return []byte("tampered " + name + "\n")
	}
	return content(name)
}

type (
	httpW    = http.ResponseWriter
	httpR    = *http.Request
	httpFunc = http.HandlerFunc
)

func httpError(w http.ResponseWriter, code int) { http.Error(w, http.StatusText(code), code) }

// total is the number of requests served.
func (u *fakeUpstream) total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.requests {
		n += c
	}
	return n
}

// refusingClient fails every request: a matching manifest must not need
// the network.
func refusingClient() *http.Client {
	return &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("network refused in this test")
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
