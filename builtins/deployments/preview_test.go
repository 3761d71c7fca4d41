// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
)

func TestPreviewRendersTheNodeGroupsStaticPods(t *testing.T) {
	ctx := context.Background()
	env := openvtest.NewEnv(t)
	var counts *faultstore.Store
	env.WrapStore = func(s objstore.Store) objstore.Store { counts = faultstore.New(s); return counts }
	bucket := filepath.Join(t.TempDir(), "bucket")
	if _, err := ctxops.Connect(ctx, env, ctxops.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: bucket, SecretsProvider: "local"}); err != nil {
		t.Fatal(err)
	}
	res, err := Preview(ctx, env, PreviewOptions{NodeGroup: "workers"})
	if err != nil || len(res.Files) != 0 {
		t.Fatalf("empty cluster: %+v, %v", res, err)
	}
	for _, d := range []DeployOptions{
		{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}, Service: true, Secrets: []string{"token", "db-url"}}},
		{ManifestOptions: manifests.ManifestOptions{Name: "api", NodeGroup: "workers", Images: []string{"api:v1"}}},
		{ManifestOptions: manifests.ManifestOptions{Name: "proxy", NodeGroup: "edge", Images: []string{"proxy:v1"}}},
	} {
		if _, err := Deploy(ctx, env, d); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	counts.ResetCounts()
	res, err = Preview(ctx, env, PreviewOptions{NodeGroup: "workers", Out: out})
	if err != nil {
		t.Fatal(err)
	}
	// Deploy left the Pod payloads and their stamps in the local object
	// cache: the index, and one LIST of the NodeGroup's Pods and one of
	// the Services prove the payloads present without reading them.
	if c := counts.Counts(); c != (faultstore.Counts{Get: 1, List: 2}) {
		t.Fatalf("preview made %+v: want the index read and two LISTs, no writes", c)
	}
	if err := os.RemoveAll(filepath.Join(env.Dirs.Cache, "objects")); err != nil {
		t.Fatal(err)
	}
	counts.ResetCounts()
	if _, err := Preview(ctx, env, PreviewOptions{NodeGroup: "workers"}); err != nil {
		t.Fatal(err)
	}
	if c := counts.Counts(); c != (faultstore.Counts{Get: 4, List: 2}) {
		t.Fatalf("preview with a cold cache made %+v: want the index, two Pod payloads, the Service payload and two LISTs, no writes", c)
	}
	if len(res.Files) != 2 || res.Files[0].File != "api.yaml" || res.Files[1].File != "web.yaml" || res.Dir != "/etc/podmin/manifests" {
		t.Fatalf("files %+v", res.Files)
	}
	web := res.Files[1]
	if len(web.Mounts) != 1 || web.Mounts[0].Provider != "local" || strings.Join(web.Mounts[0].Keys, ",") != "token,db-url" ||
		web.Mounts[0].MountPath != "/var/run/podmin/local" || web.Mounts[0].HostDir != "/run/podmin/workloads/web/secrets/local" {
		t.Fatalf("mounts %+v", web.Mounts)
	}
	for _, want := range []string{"podmin.dev/revision: " + web.Revision, "mountPath: /var/run/podmin/local", "path: /run/podmin/workloads/web/secrets/local"} {
		if !strings.Contains(web.YAML, want) {
			t.Errorf("web.yaml lacks %q:\n%s", want, web.YAML)
		}
	}
	for _, f := range res.Files {
		b, err := os.ReadFile(filepath.Join(out, f.File))
		if err != nil || string(b) != f.YAML || f.Path != filepath.Join(out, f.File) {
			t.Fatalf("%s: %v", f.File, err)
		}
	}
	if _, err := Preview(ctx, env, PreviewOptions{NodeGroup: "Bad"}); err == nil || !strings.Contains(err.Error(), "--nodegroup: invalid NodeGroup ID") {
		t.Fatalf("bad NodeGroup: %v", err)
	}
}
