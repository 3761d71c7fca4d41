// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/state"
	"podmin.dev/podmin/internal/state/statetest"
	"podmin.dev/podmin/internal/syncio"
)

// logBuffer is a log sink safe for the agent's goroutines.
type logBuffer = syncio.Buffer

// commit deploys a built-in deployment of NodeGroup workers straight to
// the bucket, as podmin deploy does.
func commit(t testing.TB, b objstore.Store, name, image string, service bool) state.Entry {
	t.Helper()
	return statetest.Commit(t, b, "workers", name, image, service)
}

// localAgent is agent.Run on a local bucket in a sandbox root.
type localAgent struct {
	bucket    *localstore.Bucket
	root      string
	health    string
	logs      *logBuffer
	cancel    context.CancelFunc
	done      chan error
	manifests string
}

func startLocalAgent(t *testing.T, poll time.Duration, tweak ...func(*Options)) *localAgent {
	t.Helper()
	dir := t.TempDir()
	a := &localAgent{bucket: localstore.Open(filepath.Join(dir, "bucket")), root: filepath.Join(dir, "root"), logs: &logBuffer{}}
	a.manifests = filepath.Join(a.root, "etc", "podmin", "manifests")
	if err := a.bucket.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	opts := Options{Root: a.root, HealthAddr: "127.0.0.1:0", PollInterval: poll, DataDir: filepath.Join(dir, "data")}
	for _, f := range tweak {
		f(&opts)
	}
	cfg := Config{Provider: "local", Bucket: a.bucket.Dir(), Region: "local", Cluster: "demo", NodeGroup: "workers",
		IPv6Prefix: netip.MustParsePrefix("2001:db8:abc:de00:1234::/80")}
	a.run(t, context.Background(), cfg, opts)
	return a
}

// run starts agent.Run with cfg and opts, logging to a.logs, and waits
// until its health server listens; the agent stops when the test ends.
func (a *localAgent) run(t *testing.T, ctx context.Context, cfg Config, opts Options) {
	t.Helper()
	started := make(chan string, 1)
	opts.Log = slog.New(slog.NewTextHandler(a.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Started = func(addr string) { started <- addr }
	runCtx, cancel := context.WithCancel(ctx)
	a.cancel, a.done = cancel, make(chan error, 1)
	go func() { a.done <- Run(runCtx, cfg, opts) }()
	select {
	case a.health = <-started:
	case err := <-a.done:
		t.Fatalf("agent exited: %v\n%s", err, a.logs)
	case <-time.After(10 * time.Second):
		t.Fatalf("agent did not start\n%s", a.logs)
	}
	t.Cleanup(func() {
		cancel()
		<-a.done
	})
}

// get reads an endpoint of the health server.
func (a *localAgent) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + a.health + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitFor polls cond every millisecond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// fileContains reports whether path exists and contains s.
func fileContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// commitMissing commits a deployment whose Pod payload was never written:
// its index entry names an object the bucket does not hold.
func commitMissing(t testing.TB, b objstore.Store, name, image string) {
	t.Helper()
	scratch := localstore.Open(filepath.Join(t.TempDir(), "scratch"))
	if err := scratch.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := commit(t, scratch, name, image, false)
	obj, err := b.Get(context.Background(), state.IndexPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := state.DecodeIndex(obj.Data)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := state.NewKey("workers", name)
	if _, _, err := ix.Set(k, e); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutIfMatch(context.Background(), state.IndexPath, ix.Encode(), obj.ETag); err != nil {
		t.Fatal(err)
	}
}

// publishWorkloadCA writes identity/ca.json for the workload CA key, as
// the elected leader does.
func publishWorkloadCA(t testing.TB, b objstore.Store, key []byte) {
	t.Helper()
	k, err := pki.ParseWorkloadKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA(rand.Reader, k, pki.WorkloadCASpec("demo"), time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	data, err := pki.CAState{Active: ca}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(context.Background(), state.IdentityCAPath, data); err != nil {
		t.Fatal(err)
	}
}
