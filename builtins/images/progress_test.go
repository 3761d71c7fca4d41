// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package images

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/progress/progresstest"
)

// TestTransfersReportProgress checks that pull, build and push report
// every byte they move into Env.Transfers, the sink the CLI and recipes
// share: each transfer ends, and the bytes moved add up.
func TestTransfersReportProgress(t *testing.T) {
	ctx := context.Background()
	env := openvtest.NewEnv(t)
	sink := &progresstest.Recorder{}
	env.Transfers = sink
	if _, err := ctxops.Connect(ctx, env, ctxops.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: filepath.Join(t.TempDir(), "bucket")}); err != nil {
		t.Fatal(err)
	}

	upstream := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(upstream.Close)
	host := strings.TrimPrefix(upstream.URL, "http://")
	idx, err := random.Index(4096, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(host + "/team/app:v1")
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	if _, err := Pull(ctx, env, PullOptions{Source: host + "/team/app:v1"}); err != nil {
		t.Fatal(err)
	}
	pull := sink.Transfers()[0]
	// Two images of two random layers, each layer's compressed bytes.
	if pull.Title != "pull "+host+"/team/app:v1" || pull.Items != 4 || pull.Done != 4 || pull.Moved == 0 || !pull.Ended || pull.Err != nil {
		t.Fatalf("pull reported:\n%s", sink)
	}

	env.WorkDir = imageContext(t)
	if _, err := Build(ctx, env, BuildOptions{Tag: []string{"hello:v1"}, Platform: []string{"linux/amd64", "linux/arm64"}}); err != nil {
		t.Fatal(err)
	}
	build := sink.Transfers()[1]
	if build.Title != "build registry.podmin.internal/apps/hello:v1" || build.Items != 2 || build.Done != 2 || !build.Ended {
		t.Fatalf("build reported:\n%s", sink)
	}

	res, err := Push(ctx, env, PushOptions{Source: "hello:v1"})
	if err != nil {
		t.Fatal(err)
	}
	push := sink.Transfers()[2]
	if push.Title != "push registry.podmin.internal/apps/hello:v1" || push.Items != res.Uploaded || push.Moved != res.UploadedBytes || push.Skipped != 0 || !push.Ended || push.Err != nil {
		t.Fatalf("push of %+v reported:\n%s", res, sink)
	}
	if push.Total != res.UploadedBytes {
		t.Errorf("push announced %d bytes and uploaded %d", push.Total, res.UploadedBytes)
	}
	// Pushing again moves nothing: every blob is skipped.
	if _, err := Push(ctx, env, PushOptions{Source: "hello:v1"}); err != nil {
		t.Fatal(err)
	}
	again := sink.Transfers()[3]
	if again.Items != 0 || again.Moved != 0 || again.Skipped != again.Total || !again.Ended {
		t.Fatalf("a repeated push reported:\n%s", sink)
	}
}
