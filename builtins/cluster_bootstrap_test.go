// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/userdata"
	"podmin.dev/podmin/internal/objstore"
)

// releaseUpstream serves the release listings recorded in
// deps/testdata and synthetic release files whose published digests are
// computed from their bodies, so every digest the resolver sees is
// genuine. It counts the release files downloaded.
type releaseUpstream struct {
	srv       *httptest.Server
	mu        sync.Mutex
	downloads int
}

var releasePlaceholder = regexp.MustCompile(`\{\{(BASE|SHA256 [^}]+|SHA512 [^}]+|SIZE [^}]+)\}\}`)

func newReleaseUpstream(t *testing.T) *releaseUpstream {
	u := &releaseUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func releaseBody(name string) []byte {
	name = strings.TrimPrefix(name, "/dl/")
	if name == "SHA512SUMS" {
		var b strings.Builder
		for _, a := range []string{"amd64", "arm64"} {
			n := "podmin-agent-linux-" + a
			fmt.Fprintf(&b, "%s  %s\n", digestHex("sha512", releaseBody(n)), n)
		}
		return []byte(b.String())
	}
	for _, ext := range []string{".sha256sum", ".sha256", ".sha512"} {
		if base, ok := strings.CutSuffix(name, ext); ok {
			alg := strings.TrimSuffix(strings.TrimPrefix(ext, "."), "sum")
			return []byte(digestHex(alg, releaseBody(base)) + "  " + path.Base(base) + "\n")
		}
	}
	return []byte("release file " + name + "\n")
}

func digestHex(alg string, b []byte) string {
	if alg == "sha512" {
		s := sha512.Sum512(b)
		return hex.EncodeToString(s[:])
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (u *releaseUpstream) expand(data string) string {
	return releasePlaceholder.ReplaceAllStringFunc(data, func(m string) string {
		m = strings.Trim(m, "{}")
		switch {
		case m == "BASE":
			return u.srv.URL
		case strings.HasPrefix(m, "SHA256 "):
			return digestHex("sha256", releaseBody(strings.TrimPrefix(m, "SHA256 ")))
		case strings.HasPrefix(m, "SHA512 "):
			return digestHex("sha512", releaseBody(strings.TrimPrefix(m, "SHA512 ")))
		default:
			return fmt.Sprint(len(releaseBody(strings.TrimPrefix(m, "SIZE "))))
		}
	})
}

func (u *releaseUpstream) serve(w http.ResponseWriter, r *http.Request) {
	const testdata = "deps/testdata/"
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
		_, _ = w.Write(releaseBody(p))
	default:
		http.NotFound(w, r)
	}
}

func (u *releaseUpstream) downloaded() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.downloads
}

// fakeImageMirror records the mirrored images in the bucket without a
// registry; Check finds them again there.
func fakeImageMirror(ctx context.Context, store objstore.Store, img deps.Image) (deps.ImageEntry, error) {
	body := []byte(`{"schemaVersion":2}`)
	if _, err := store.Put(ctx, img.Path()+"/index.json", body); err != nil {
		return deps.ImageEntry{}, err
	}
	return deps.ImageEntry{Version: img.Version, Source: img.Source(), Path: img.Path(),
		Digest: "sha256:" + digestHex("sha256", body), Size: int64(len(body))}, nil
}

func fakeImageCheck(ctx context.Context, store objstore.Store, img deps.Image, _ deps.ImageEntry) error {
	if _, err := store.Head(ctx, img.Path()+"/index.json"); errors.Is(err, objstore.ErrNotFound) {
		return deps.ErrImageMissing
	} else if err != nil {
		return err
	}
	return nil
}

// TestAWSSetupPublishesNodeBootstrap runs AWS setup with the real node
// bootstrap: the dependencies are resolved from the recorded upstream
// release APIs, published into the bucket, and the user data and Jool
// archive rendered from that manifest reach the OpenTofu/Terraform
// variables. A second setup transfers nothing.
func TestAWSSetupPublishesNodeBootstrap(t *testing.T) {
	ae := newAWSEnv(t)
	ctx := t.Context()
	up := newReleaseUpstream(t)
	var boots []*AWSBootstrap
	ae.bootstrap = func(e *Env) NodeBootstrap {
		b := &AWSBootstrap{Env: e, EC2: ae.ec2.Client(t), Client: up.srv.Client(),
			Resolver: &deps.Resolver{Client: up.srv.Client(), GitHubAPI: up.srv.URL + "/api", AgentVersion: "1.4.0",
				Hosts: map[deps.DownloadHost]string{deps.KubernetesHost: up.srv.URL + "/k8s", deps.GVisorHost: up.srv.URL + "/gvisor",
					deps.FluentBitHost: up.srv.URL + "/fluentbit", deps.DebianHost: up.srv.URL + "/debian"}},
			Mirror: fakeImageMirror, Check: fakeImageCheck,
			ImageManifestURL: func(name string) (string, error) {
				u, err := userdata.DebianImageManifestURL(name)
				return up.srv.URL + "/images/" + path.Base(u), err
			}}
		boots = append(boots, b)
		return b
	}
	opts := SetupOptions{VPCCIDR: "10.0.0.0/16", NAT64: "instance-type=m7i.large",
		NodeGroup: []string{"default", "workers,instance-type=m7i.large,zone=b"},
		OtelLogs:  "endpoint=https://otel.example.com/v1/logs,protocol=http,mtls=false"}
	res, err := ae.Setup(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || len(boots) != 1 {
		t.Fatalf("setup %+v with %d bootstraps", res, len(boots))
	}
	first := boots[0].Published()
	if first == nil || !first.Written || len(first.Uploaded) == 0 || len(first.Images) != 1 || up.downloaded() == 0 {
		t.Fatalf("first publication %+v after %d downloads", first, up.downloaded())
	}
	t.Logf("first setup: %d files uploaded, %d images, %d downloads", len(first.Uploaded), len(first.Images), up.downloaded())
	m := first.Manifest
	for _, key := range []string{"kubelet", "containerd", "podmin-agent", "fluent-bit", "libpq5"} {
		for _, a := range []deps.Arch{"amd64", "arm64"} {
			if _, ok := m.Dependencies[key][a]; !ok {
				t.Errorf("manifest lacks %s for %s", key, a)
			}
		}
	}
	jool, ok := m.Dependencies["jool"]["amd64"]
	if !ok || !strings.Contains(jool.Path, "6.12.41+deb13-cloud-amd64") {
		t.Fatalf("Jool for the AMI's kernel: %+v", m.Dependencies["jool"])
	}

	// The variables OpenTofu/Terraform ran with carry the rendered user
	// data of each NodeGroup and the verified Jool archive.
	data, err := os.ReadFile(filepath.Join(infra.ModuleDir(ae.Dirs.Cache, "demo"), infra.VarsFile))
	if err != nil {
		t.Fatal(err)
	}
	var vars infra.Vars
	if err := json.Unmarshal(data, &vars); err != nil {
		t.Fatal(err)
	}
	// The cluster configuration the agents read carries the canonical
	// --otel-logs value.
	if vars.OtelLogs != "endpoint=https://otel.example.com/v1/logs" {
		t.Fatalf("otel_logs %q is not the canonical value", vars.OtelLogs)
	}
	for name, arch := range map[string]string{"default": "arm64", "workers": "amd64"} {
		ng := vars.NodeGroups[name]
		want, err := userdata.RenderNode(userdata.Node{Cluster: "demo", NodeGroup: name, Bucket: "demo-state", Region: vars.Region,
			Arch: deps.Arch(arch), Manifest: m, OTelLogs: true})
		if err != nil {
			t.Fatal(err)
		}
		if ng.Arch != arch || ng.UserData != want.Base64 {
			t.Fatalf("NodeGroup %s (%s): user data is not the one rendered from the published manifest", name, ng.Arch)
		}
		script := gunzipBase64(t, ng.UserData)
		kubelet := m.Dependencies["kubelet"][deps.Arch(arch)]
		if !strings.Contains(script, path.Base(kubelet.Path)) || !strings.Contains(script, "demo-state") {
			t.Fatalf("NodeGroup %s user data lacks its kubelet %s:\n%s", name, kubelet.Path, script)
		}
	}
	sum := digestHex("sha256", releaseBody("jool-4.1.14-6.12.41+deb13-cloud-amd64.tar.gz"))
	if got := vars.JoolArchives["amd64"]; got.Key != jool.Path || got.SHA256 != sum {
		t.Fatalf("Jool archive %+v, want %s with SHA-256 %s", got, jool.Path, sum)
	}
	seen, err := os.ReadFile(ae.seen)
	if err != nil || !bytes.Contains(seen, []byte(vars.NodeGroups["default"].UserData)) || !bytes.Contains(seen, []byte(sum)) {
		t.Fatalf("OpenTofu/Terraform was not shown the user data and the Jool digest (%v)", err)
	}

	// A second setup finds the manifest current: no download, no upload,
	// no manifest write, and the same user data.
	before := up.downloaded()
	if _, err := ae.Setup(ctx, opts); err != nil {
		t.Fatal(err)
	}
	second := boots[len(boots)-1].Published()
	if len(boots) != 2 || second == nil || second.Written || len(second.Uploaded)+len(second.Images) != 0 || up.downloaded() != before {
		t.Fatalf("second publication %+v, %d downloads", second, up.downloaded()-before)
	}
	again, err := os.ReadFile(filepath.Join(infra.ModuleDir(ae.Dirs.Cache, "demo"), infra.VarsFile))
	if err != nil {
		t.Fatal(err)
	}
	var vars2 infra.Vars
	if err := json.Unmarshal(again, &vars2); err != nil {
		t.Fatal(err)
	}
	if vars2.NodeGroups["workers"].UserData != vars.NodeGroups["workers"].UserData {
		t.Fatal("the user data changed without a dependency change")
	}
}

func gunzipBase64(t *testing.T, s string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
