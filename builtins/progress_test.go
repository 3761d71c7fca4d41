// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/internal/progress"
)

// recordingSink keeps what operations report, per transfer.
type recordingSink struct {
	mu        sync.Mutex
	transfers []*recordedTransfer
}

type recordedTransfer struct {
	s                  *recordingSink
	title              string
	total, moved, skip int64
	items              int
	done               int
	ended              bool
	err                error
}

func (s *recordingSink) Begin(title string, total int64) progress.Transfer {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &recordedTransfer{s: s, title: title, total: total}
	s.transfers = append(s.transfers, t)
	return t
}

func (t *recordedTransfer) Item(_ string, size int64) progress.Item {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.items++
	return recordedItem{t}
}

func (t *recordedTransfer) Skip(n int64) { t.s.mu.Lock(); t.skip += n; t.s.mu.Unlock() }
func (t *recordedTransfer) End(err error) {
	t.s.mu.Lock()
	t.ended, t.err = true, err
	t.s.mu.Unlock()
}

type recordedItem struct{ t *recordedTransfer }

func (i recordedItem) Add(n int64) { i.t.s.mu.Lock(); i.t.moved += n; i.t.s.mu.Unlock() }
func (i recordedItem) Done()       { i.t.s.mu.Lock(); i.t.done++; i.t.s.mu.Unlock() }

func (s *recordingSink) String() string {
	var b strings.Builder
	for _, t := range s.transfers {
		fmt.Fprintf(&b, "%s: total %d, moved %d, skipped %d, %d/%d items done, ended %v (%v)\n", t.title, t.total, t.moved, t.skip, t.done, t.items, t.ended, t.err)
	}
	return b.String()
}

// TestTransfersReportProgress checks that pull, build and push report
// every byte they move into Env.Transfers, the sink the CLI and recipes
// share: each transfer ends, and the bytes moved add up.
func TestTransfersReportProgress(t *testing.T) {
	ctx := context.Background()
	env := testEnv(t)
	sink := &recordingSink{}
	env.Transfers = sink
	if _, err := env.Connect(ctx, ConnectOptions{Cluster: "demo", Provider: "local", Bucket: filepath.Join(t.TempDir(), "bucket")}); err != nil {
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
	if _, err := env.Pull(ctx, PullOptions{Source: host + "/team/app:v1"}); err != nil {
		t.Fatal(err)
	}
	pull := sink.transfers[0]
	// Two images of two random layers, each layer's compressed bytes.
	if pull.title != "pull "+host+"/team/app:v1" || pull.items != 4 || pull.done != 4 || pull.moved == 0 || !pull.ended || pull.err != nil {
		t.Fatalf("pull reported:\n%s", sink)
	}

	env.WorkDir = imageContext(t)
	if _, err := env.Build(ctx, BuildOptions{Tag: []string{"hello:v1"}, Platform: []string{"linux/amd64", "linux/arm64"}}); err != nil {
		t.Fatal(err)
	}
	build := sink.transfers[1]
	if build.title != "build registry.podmin.internal/apps/hello:v1" || build.items != 2 || build.done != 2 || !build.ended {
		t.Fatalf("build reported:\n%s", sink)
	}

	res, err := env.Push(ctx, PushOptions{Source: "hello:v1"})
	if err != nil {
		t.Fatal(err)
	}
	push := sink.transfers[2]
	if push.title != "push registry.podmin.internal/apps/hello:v1" || push.items != res.Uploaded || push.moved != res.UploadedBytes || push.skip != 0 || !push.ended || push.err != nil {
		t.Fatalf("push of %+v reported:\n%s", res, sink)
	}
	if push.total != res.UploadedBytes {
		t.Errorf("push announced %d bytes and uploaded %d", push.total, res.UploadedBytes)
	}
	// Pushing again moves nothing: every blob is skipped.
	if _, err := env.Push(ctx, PushOptions{Source: "hello:v1"}); err != nil {
		t.Fatal(err)
	}
	again := sink.transfers[3]
	if again.items != 0 || again.moved != 0 || again.skip != again.total || !again.ended {
		t.Fatalf("a repeated push reported:\n%s", sink)
	}
}
