// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/internal/version"
)

func TestFetchRejectsUnknownArchitectureAndLeavesBucketAlone(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	before := c.snapshot()
	// The architecture is checked before any request is made.
	c.fails(2, `unknown architecture "riscv64": use amd64 or arm64`, "fetch", "--arch", "riscv64")
	c.fails(2, "unknown output format", "fetch", "-o", "xml")
	c.unchanged(before)
	if _, err := os.Stat(filepath.Join(c.root, "cache", "podmin", "dependencies")); !os.IsNotExist(err) {
		t.Fatalf("a refused fetch created the cache: %v", err)
	}
}

// fetchExitRows are the exit-code rows of fetch; fresh has no context
// (fetch needs none), c is connected.
func fetchExitRows(t *testing.T, fresh, c *cli) []exitRow {
	f := newCLI(t)
	f.connectLocal()
	fetchCLI(t, f)
	return []exitRow{
		{f, exitOK, "", []string{"fetch", "--arch", "arm64"}},
		{f, exitOK, "", []string{"fetch", "--arch", "arm64", "-o", "json"}},
		{fresh, exitUsage, `unknown output format "xml"`, []string{"fetch", "-o", "xml"}},
		{fresh, exitUsage, `unknown command "containerd" for "podmin fetch"`, []string{"fetch", "containerd"}},
		{fresh, exitUsage, "unknown flag: --archs", []string{"fetch", "--archs", "amd64"}},
		{fresh, exitUsage, `unknown architecture "riscv64": use amd64 or arm64`, []string{"fetch", "--arch", "riscv64"}},
	}
}

// fakeDepsUpstream answers every request fetch makes, in process: the
// GitHub releases API, release assets and the off-GitHub download hosts.
// One stable release per dependency matches its pin; every file's
// content is derived from its URL and every published digest is computed
// from that content, so fetch verifies genuine digests.
type fakeDepsUpstream struct {
	mu       sync.Mutex
	files    map[string][]byte
	requests int
}

// newFakeDepsUpstream publishes the canonical dependency set, with the
// agent released as agentVersion.
func newFakeDepsUpstream(t *testing.T, agentVersion string) *fakeDepsUpstream {
	t.Helper()
	u := &fakeDepsUpstream{files: map[string][]byte{}}
	for _, d := range deps.Selected(nil) {
		var version string
		switch {
		case d.Source.Kind == deps.PodminRelease:
			version = agentVersion
		case d.Pin == "":
			version = "20251110.0"
		case strings.Count(d.Pin, ".") == 0:
			version = strings.TrimPrefix(d.Pin, "v") + ".4.2"
		default:
			version = strings.TrimPrefix(d.Pin, "v") + ".3"
		}
		tag := d.Source.TagPrefix + version
		type asset struct {
			Name string `json:"name"`
			Size int    `json:"size"`
			URL  string `json:"browser_download_url"`
		}
		rel := struct {
			TagName    string  `json:"tag_name"`
			Draft      bool    `json:"draft"`
			Prerelease bool    `json:"prerelease"`
			Assets     []asset `json:"assets"`
		}{TagName: tag, Assets: []asset{}}
		add := func(name, url string, body []byte) {
			u.files[url] = body
			rel.Assets = append(rel.Assets, asset{Name: name, Size: len(body), URL: url})
		}
		var sums strings.Builder
		for _, a := range []deps.Arch{deps.AMD64, deps.ARM64} {
			x := strings.NewReplacer("{version}", version, "{arch}", d.ArchNames[a], "{podarch}", string(a))
			if d.Source.Host != deps.AssetHost {
				url := deps.DefaultHosts[d.Source.Host] + x.Replace(d.Source.Path)
				body := []byte("release file " + url + "\n")
				u.files[url] = body
				u.files[url+".sha512"] = []byte(hexSum("sha512", body) + "  " + path.Base(url) + "\n")
				continue
			}
			name := x.Replace(d.Asset)
			base := "https://github.com/" + d.Source.Repo + "/releases/download/" + tag + "/"
			body := []byte("release file " + base + name + "\n")
			add(name, base+name, body)
			for _, alg := range []string{"sha512", "sha256"} {
				if suffix, ok := d.Digest.Sidecars[alg]; ok {
					add(name+suffix, base+name+suffix, []byte(hexSum(alg, body)+"  "+name+"\n"))
					break
				}
			}
			if d.Digest.Checksums != "" {
				fmt.Fprintf(&sums, "%s  %s\n", hexSum(d.Digest.ChecksumsAlgorithm, body), name)
			}
		}
		if d.Digest.Checksums != "" {
			add(d.Digest.Checksums, "https://github.com/"+d.Source.Repo+"/releases/download/"+tag+"/"+d.Digest.Checksums, []byte(sums.String()))
		}
		api := deps.DefaultGitHubAPI + "/repos/" + d.Source.Repo
		one, err := json.Marshal(rel)
		if err != nil {
			t.Fatal(err)
		}
		if d.Source.Kind == deps.PodminRelease {
			u.files[api+"/releases/tags/"+tag] = one
		} else {
			u.files[api+"/releases"] = []byte("[" + string(one) + "]")
		}
	}
	return u
}

func hexSum(alg string, b []byte) string {
	if alg == "sha512" {
		s := sha512.Sum512(b)
		return hex.EncodeToString(s[:])
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// RoundTrip serves a published file by its URL, the first page of a
// release listing for ?page=1 and an empty one after it.
func (u *fakeDepsUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	u.mu.Lock()
	u.requests++
	u.mu.Unlock()
	key := req.URL.Scheme + "://" + req.URL.Host + req.URL.Path
	body, ok := u.files[key]
	if ok && strings.HasSuffix(key, "/releases") && req.URL.Query().Get("page") != "1" {
		body = []byte("[]")
	}
	status := http.StatusOK
	if !ok {
		status, body = http.StatusNotFound, []byte("not found\n")
	}
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/octet-stream"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// fetchCLI is a CLI whose fetches reach u, built as release
// agentVersion (a development build has no published agent).
func fetchCLI(t *testing.T, c *cli) *fakeDepsUpstream {
	t.Helper()
	const agentVersion = "1.4.0"
	u := newFakeDepsUpstream(t, agentVersion)
	old := version.Version
	version.Version = agentVersion
	t.Cleanup(func() { version.Version = old })
	adjust := c.adjust
	c.adjust = func(e *builtins.Env) {
		if adjust != nil {
			adjust(e)
		}
		e.Transport = u
	}
	return u
}

func TestFetchDownloadsVerifiedFilesIntoTheCache(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	u := fetchCLI(t, c)
	var res deps.FetchResult
	if err := json.Unmarshal([]byte(c.ok("fetch", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Dir != filepath.Join(c.root, "cache", "podmin", "dependencies") || len(res.Files) != 14 {
		t.Fatalf("fetched %d files into %s", len(res.Files), res.Dir)
	}
	for _, f := range res.Files {
		b, err := os.ReadFile(f.Cache)
		if err != nil || int64(len(b)) != f.Size || !strings.HasPrefix(f.Cache, res.Dir+string(os.PathSeparator)+f.Key+string(os.PathSeparator)) {
			t.Fatalf("%+v: %v", f, err)
		}
		alg, want, _ := strings.Cut(f.Digest, ":")
		if hexSum(alg, b) != want {
			t.Fatalf("%s: cached bytes do not match %s", f.Cache, f.Digest)
		}
	}
	// A corrupt cached file is downloaded again; the rest are kept.
	bad := res.Files[0].Cache
	if err := os.WriteFile(bad, []byte("corrupt"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := c.ok("fetch")
	if !strings.HasSuffix(out, "14 files in "+res.Dir+"\n") {
		t.Fatalf("fetch table:\n%s", out)
	}
	if b, _ := os.ReadFile(bad); int64(len(b)) != res.Files[0].Size {
		t.Fatalf("the corrupt file was kept: %q", b)
	}
	if u.requests == 0 {
		t.Fatal("fetch made no request to the upstream")
	}
	// The cluster bucket is never read or written: it holds only what
	// connect put there.
	entries, err := os.ReadDir(bucket)
	if err != nil || len(entries) != 1 || entries[0].Name() != ".podmin" {
		t.Fatalf("bucket after fetch: %v %v", entries, err)
	}
}

// fetchGoldenSteps points c's fetches at a fake upstream and returns the
// fetch step.
func fetchGoldenSteps(t *testing.T, c *cli) []goldenStep {
	fetchCLI(t, c)
	return []goldenStep{{"fetch", []string{"fetch"}}}
}
