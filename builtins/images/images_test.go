// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package images

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/oci"
)

func imageContext(t *testing.T) string {
	dir := t.TempDir()
	for p, c := range map[string]string{
		"Containerfile":   "FROM scratch\nARG TARGETARCH\nCOPY bin/${TARGETARCH}/app /app\nENTRYPOINT [\"/app\"]\n",
		"bin/amd64/app":   "amd64",
		"bin/arm64/app":   "arm64",
		"bin/riscv64/app": "riscv64",
	} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuildAndPush(t *testing.T) {
	ctx := context.Background()
	env := openvtest.NewEnv(t)
	var counts *faultstore.Store
	env.WrapStore = func(s objstore.Store) objstore.Store { counts = faultstore.New(s); return counts }
	if _, err := ctxops.Connect(ctx, env, ctxops.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: filepath.Join(t.TempDir(), "bucket")}); err != nil {
		t.Fatal(err)
	}
	env.WorkDir = imageContext(t)
	built, err := Build(ctx, env, BuildOptions{Tag: []string{"hello:v1", "hello:latest"}, Platform: []string{"linux/amd64", "linux/arm64"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(built.References, " ") != "registry.podmin.internal/apps/hello:v1 registry.podmin.internal/apps/hello:latest" ||
		strings.Join(built.Platforms, " ") != "linux/amd64 linux/arm64" {
		t.Fatalf("build result %+v", built)
	}
	res, err := Push(ctx, env, PushOptions{Source: "hello:v1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.References[0] != "registry.podmin.internal/apps/hello:v1" || res.Digest != built.Digest || res.Uploaded != res.Blobs {
		t.Fatalf("push result %+v", res)
	}
	counts.ResetCounts()
	if res, err = Push(ctx, env, PushOptions{Source: "hello:v1"}); err != nil || res.Uploaded != 0 || counts.Counts().Writes() != 0 {
		t.Fatalf("re-push %+v %v, requests %+v", res, err, counts.Counts())
	}
	if res, err = Push(ctx, env, PushOptions{Source: "hello:v1", Destination: "team/hello:stable"}); err != nil || res.References[0] != "registry.podmin.internal/apps/team/hello:stable" {
		t.Fatalf("push to a destination %+v %v", res, err)
	}
	for _, tc := range []struct {
		opts PushOptions
		err  string
	}{
		{PushOptions{Source: "hello:v1", Destination: "mirror/pause"}, "mirror/ is reserved"},
		{PushOptions{Source: "registry.podmin.internal/apps/missing:v1"}, `registry.podmin.internal/apps/missing:v1 is not in the local image store: run "podmin build -t registry.podmin.internal/apps/missing:v1" first`},
	} {
		if _, err := Push(ctx, env, tc.opts); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Push(%+v) error = %v, want %q", tc.opts, err, tc.err)
		}
	}
	if _, err := Build(ctx, env, BuildOptions{Tag: []string{"hello:v2"}, Platform: []string{"linux"}}); err == nil || !strings.Contains(err.Error(), `platform "linux" must be OS/ARCH`) {
		t.Errorf("bad platform error = %v", err)
	}
	if _, err := Build(ctx, env, BuildOptions{}); err == nil || !strings.Contains(err.Error(), "--tag") {
		t.Errorf("no tag error = %v", err)
	}
}

func TestPullAndPushFromARegistry(t *testing.T) {
	ctx := context.Background()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	a, _ := random.Image(256, 1)
	b, _ := random.Image(256, 1)
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: a}, mutate.IndexAddendum{Add: b})
	ref, _ := name.ParseReference(host + "/example/web:v1")
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()

	env := openvtest.NewEnv(t)
	res, err := Pull(ctx, env, PullOptions{Source: host + "/example/web:v1"})
	if err != nil || res.Digest != want.String() || res.References[0] != host+"/example/web:v1" {
		t.Fatalf("pull %+v, %v", res, err)
	}
	if _, err := ctxops.Connect(ctx, env, ctxops.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: filepath.Join(t.TempDir(), "bucket")}); err != nil {
		t.Fatal(err)
	}
	// Push pulls what is missing and keeps repository and tag beneath apps/.
	pushed, err := Push(ctx, env, PushOptions{Source: host + "/example/other:v1", Destination: ""})
	if err == nil {
		t.Fatalf("push of a missing remote image succeeded: %+v", pushed)
	}
	if err := remote.WriteIndex(must(name.ParseReference(host+"/example/other:v1")), idx); err != nil {
		t.Fatal(err)
	}
	pushed, err = Push(ctx, env, PushOptions{Source: host + "/example/other:v1"})
	if err != nil || pushed.References[0] != "registry.podmin.internal/apps/example/other:v1" || pushed.Digest != want.String() {
		t.Fatalf("push %+v, %v", pushed, err)
	}
	if _, err := oci.NewStore(filepath.Join(env.Dirs.Cache, "images")).Lookup(host+"/example/other", "v1"); err != nil {
		t.Errorf("push did not keep the pulled image: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
