// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"strings"
	"testing"

	"podmin.dev/podmin/internal/state"
)

var (
	hex128 = strings.Repeat("0", 128)
	hex64  = strings.Repeat("a", 64)
)

func TestFixedPaths(t *testing.T) {
	for got, want := range map[string]string{
		state.TFStatePath:            "tfstate/podmin.tfstate",
		state.TFLockPath:             "tfstate/podmin.tfstate.tflock",
		state.TFVarsPath:             "tfstate/podmin.auto.tfvars.json",
		state.DependencyManifestPath: "dependencies/manifest.json",
		state.IndexPath:              "deployments/index.json",
		state.DNSLeaderPath:          "dns/leader.json",
		state.DNSServicesPath:        "dns/services.pb",
		state.IdentityCAPath:         "identity/ca.json",
	} {
		if got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}
}

func TestPodPath(t *testing.T) {
	for _, tc := range []struct {
		ng, digest, want, err string
	}{
		{"workers", hex128, "nodegroups/workers/pods/sha512/" + hex128 + ".yaml", ""},
		{"work/ers", hex128, "", `invalid NodeGroup ID "work/ers": character '/' at position 5 is not allowed`},
		{"", hex128, "", "invalid NodeGroup ID: it is empty"},
		{"workers", "AB" + hex128[2:], "", "use exactly 128 lowercase hexadecimal characters"},
		{"workers", hex128[1:], "", `invalid sha512 digest "` + hex128[1:] + `"`},
		{"workers", hex64, "", "use exactly 128 lowercase hexadecimal characters"},
	} {
		got, err := state.PodPath(tc.ng, tc.digest)
		checkErr(t, "PodPath("+tc.ng+")", err, tc.err)
		if got != tc.want {
			t.Errorf("PodPath(%q) = %q, want %q", tc.ng, got, tc.want)
		}
	}
}

func TestParsePodPath(t *testing.T) {
	ng, d, err := state.ParsePodPath("nodegroups/workers/pods/sha512/" + hex128 + ".yaml")
	if err != nil || ng != "workers" || d != hex128 {
		t.Fatalf("ParsePodPath = %q, %q, %v", ng, d, err)
	}
	for _, p := range []string{
		"",
		"nodegroups/workers/pods/sha512/" + hex128,
		"nodegroups/workers/pods/sha256/" + hex128 + ".yaml",
		"nodegroups/workers/x/pods/sha512/" + hex128 + ".yaml",
		"nodegroups/../pods/sha512/" + hex128 + ".yaml",
		"nodegroups/Workers/pods/sha512/" + hex128 + ".yaml",
		"/nodegroups/workers/pods/sha512/" + hex128 + ".yaml",
		"services/workers/pods/sha512/" + hex128 + ".yaml",
		"nodegroups/workers/pods/sha512/AB" + hex128[2:] + ".yaml",
	} {
		if _, _, err := state.ParsePodPath(p); err == nil || !strings.Contains(err.Error(), "is not a Pod payload path") {
			t.Errorf("ParsePodPath(%q) error = %v, want rejection", p, err)
		}
	}
}

func TestServicePath(t *testing.T) {
	for _, tc := range []struct {
		ns, svc, want, err string
	}{
		{"product", "frontend", "services/product/frontend/sha512/" + hex128 + ".yaml", ""},
		{"prod/uct", "frontend", "", `invalid namespace "prod/uct": use at most 63 lowercase letters`},
		{"_system", "frontend", "", `invalid namespace "_system"`},
		{"product", "1frontend", "", `invalid Service name "1frontend": use at most 63 lowercase letters, digits and hyphens, starting with a letter`},
		{"product", "front.end", "", `invalid Service name "front.end"`},
		{"product", strings.Repeat("a", 64), "", "invalid Service name"},
	} {
		got, err := state.ServicePath(tc.ns, tc.svc, hex128)
		checkErr(t, "ServicePath("+tc.ns+","+tc.svc+")", err, tc.err)
		if got != tc.want {
			t.Errorf("ServicePath = %q, want %q", got, tc.want)
		}
	}
	id, d, err := state.ParseServicePath("services/product/frontend/sha512/" + hex128 + ".yaml")
	if err != nil || id != (state.ServiceID{Namespace: "product", Name: "frontend"}) || d != hex128 || id.String() != "product/frontend" {
		t.Fatalf("ParseServicePath = %v, %q, %v", id, d, err)
	}
	for _, p := range []string{
		"services/product/sha512/" + hex128 + ".yaml",
		"services/product/front/end/sha512/" + hex128 + ".yaml",
		"services/product/frontend/sha512/" + hex64 + ".yaml",
	} {
		if _, _, err := state.ParseServicePath(p); err == nil {
			t.Errorf("ParseServicePath(%q) accepted", p)
		}
	}
}

func TestDependencyPath(t *testing.T) {
	p, err := state.DependencyPath("containerd", "containerd-v2.1.4-linux-amd64.tar.gz")
	if err != nil || p != "dependencies/containerd/containerd-v2.1.4-linux-amd64.tar.gz" {
		t.Fatalf("DependencyPath = %q, %v", p, err)
	}
	name, file, err := state.ParseDependencyPath(p)
	if err != nil || name != "containerd" || file != "containerd-v2.1.4-linux-amd64.tar.gz" {
		t.Fatalf("ParseDependencyPath = %q, %q, %v", name, file, err)
	}
	for _, tc := range [][2]string{{"a/b", "f"}, {"..", "f"}, {"a", ".hidden"}, {"a", ""}, {"a", "x y"}} {
		if _, err := state.DependencyPath(tc[0], tc[1]); err == nil {
			t.Errorf("DependencyPath(%q, %q) accepted", tc[0], tc[1])
		}
	}
	for _, p := range []string{state.DependencyManifestPath, "dependencies/a/b/c", "apps/a/b"} {
		if _, _, err := state.ParseDependencyPath(p); err == nil {
			t.Errorf("ParseDependencyPath(%q) accepted", p)
		}
	}
}

func TestOCILayouts(t *testing.T) {
	app, err := state.AppLayout("example/web")
	if err != nil {
		t.Fatal(err)
	}
	blob, err := app.BlobPath("sha256:" + hex64)
	if err != nil {
		t.Fatal(err)
	}
	if app.Root() != "apps/example/web" || app.LayoutFile() != "apps/example/web/oci-layout" ||
		app.IndexFile() != "apps/example/web/index.json" || blob != "apps/example/web/blobs/sha256/"+hex64 {
		t.Fatalf("app layout paths: %q %q %q %q", app.Root(), app.LayoutFile(), app.IndexFile(), blob)
	}
	mirror, err := state.MirrorLayout("registry.k8s.io", "pause")
	if err != nil {
		t.Fatal(err)
	}
	mblob, _ := mirror.BlobPath("sha256:" + hex64)
	if mirror.IndexFile() != "mirror/registry.k8s.io/pause/index.json" || mblob != "mirror/registry.k8s.io/pause/blobs/sha256/"+hex64 {
		t.Fatalf("mirror layout paths: %q %q", mirror.IndexFile(), mblob)
	}
	for _, p := range []string{blob, mblob} {
		l, d, err := state.ParseOCIBlobPath(p)
		if err != nil || d != "sha256:"+hex64 {
			t.Fatalf("ParseOCIBlobPath(%q) = %v, %q, %v", p, l, d, err)
		}
		if again, _ := l.BlobPath(d); again != p {
			t.Errorf("round trip of %q gave %q", p, again)
		}
	}
	for _, repo := range []string{"", "Web", "web/", "/web", "a//b", "a..b", "a-.b", "a___b", "-a", "a_", "../x"} {
		if _, err := state.AppLayout(repo); err == nil {
			t.Errorf("AppLayout(%q) accepted", repo)
		}
	}
	for _, repo := range []string{"a", "a.b", "a_b", "a__b", "a---b", "library/pause", "a0/b1/c2"} {
		if _, err := state.AppLayout(repo); err != nil {
			t.Errorf("AppLayout(%q): %v", repo, err)
		}
	}
	for _, host := range []string{"", "Docker.io", "localhost:0", "localhost:65536", "a/b", "localhost:05000", "-a.io"} {
		if _, err := state.MirrorLayout(host, "pause"); err == nil {
			t.Errorf("MirrorLayout(%q) accepted", host)
		}
	}
	if _, err := state.MirrorLayout("localhost:5000", "pause"); err != nil {
		t.Error(err)
	}
	for _, d := range []string{hex64, "sha512:" + hex128, "sha256:" + hex64[1:], "sha256:" + strings.ToUpper(hex64)} {
		if _, err := app.BlobPath(d); err == nil {
			t.Errorf("BlobPath(%q) accepted", d)
		}
	}
	for _, p := range []string{"apps/web/blobs/sha256/" + hex64[1:], "other/web/blobs/sha256/" + hex64, "apps/web/index.json", "mirror/pause/blobs/sha256/" + hex64} {
		if _, _, err := state.ParseOCIBlobPath(p); err == nil {
			t.Errorf("ParseOCIBlobPath(%q) accepted", p)
		}
	}
}

func TestKeys(t *testing.T) {
	k, err := state.ParseKey("workers/web.v2")
	if err != nil || k != (state.Key{NodeGroup: "workers", Name: "web.v2"}) || k.String() != "workers/web.v2" {
		t.Fatalf("ParseKey = %v, %v", k, err)
	}
	for _, tc := range []struct{ in, err string }{
		{"workers", `invalid deployment key "workers": expected <nodegroup>/<deployment>`},
		{"workers/web/x", `invalid deployment key "workers/web/x": invalid deployment name "web/x"`},
		{"workers/Web", `invalid deployment name "Web"`},
		{"workers/", `invalid deployment name ""`},
		{"/web", "invalid NodeGroup ID: it is empty"},
		{"all/web", `invalid NodeGroup ID "all": the name is reserved`},
		{"workers/a..b", `invalid deployment name "a..b"`},
	} {
		_, err := state.ParseKey(tc.in)
		checkErr(t, "ParseKey("+tc.in+")", err, tc.err)
	}
}

func TestVerifyPayload(t *testing.T) {
	data := podYAML("default", "web", "example/web:v1")
	p, err := state.PodPayloadPath("workers", data)
	if err != nil {
		t.Fatal(err)
	}
	if err := state.VerifyPayload(p, data); err != nil {
		t.Fatal(err)
	}
	err = state.VerifyPayload(p, append(data, '\n'))
	checkErr(t, "VerifyPayload(changed)", err, "deploy it again (an identical deploy replaces the object)")
	if !errorsIs(err, state.ErrCorruptPayload) {
		t.Errorf("error %v does not wrap ErrCorruptPayload", err)
	}
	sp, err := state.ServicePayloadPath("product", "frontend", data)
	if err != nil || !strings.HasPrefix(sp, "services/product/frontend/sha512/") {
		t.Fatal(sp, err)
	}
	if err := state.VerifyPayload(sp, data); err != nil {
		t.Fatal(err)
	}
	checkErr(t, "VerifyPayload(non-payload)", state.VerifyPayload("apps/x/index.json", data), "is neither a Pod nor a Service payload path")
}

func FuzzParsePodPath(f *testing.F) {
	f.Add("nodegroups/workers/pods/sha512/" + hex128 + ".yaml")
	f.Add("nodegroups/a/pods/sha512/x.yaml")
	f.Fuzz(func(t *testing.T, p string) {
		ng, d, err := state.ParsePodPath(p)
		if err != nil {
			return
		}
		if again, err := state.PodPath(ng, d); err != nil || again != p {
			t.Fatalf("%q parsed to %q %q, which builds %q (%v)", p, ng, d, again, err)
		}
	})
}

func FuzzParseServicePath(f *testing.F) {
	f.Add("services/product/frontend/sha512/" + hex128 + ".yaml")
	f.Fuzz(func(t *testing.T, p string) {
		id, d, err := state.ParseServicePath(p)
		if err != nil {
			return
		}
		if again, err := state.ServicePath(id.Namespace, id.Name, d); err != nil || again != p {
			t.Fatalf("%q parsed to %v %q, which builds %q (%v)", p, id, d, again, err)
		}
	})
}

func FuzzParseOCIBlobPath(f *testing.F) {
	f.Add("apps/example/web/blobs/sha256/" + hex64)
	f.Add("mirror/registry.k8s.io/pause/blobs/sha256/" + hex64)
	f.Fuzz(func(t *testing.T, p string) {
		l, d, err := state.ParseOCIBlobPath(p)
		if err != nil {
			return
		}
		if again, err := l.BlobPath(d); err != nil || again != p {
			t.Fatalf("%q parsed to %v %q, which builds %q (%v)", p, l, d, again, err)
		}
	})
}
