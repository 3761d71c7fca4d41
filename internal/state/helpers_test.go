// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// newLocal returns an empty local bucket in a temporary directory.
func newLocal(t testing.TB) *local.Bucket {
	t.Helper()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

// noSleep is an injected Sleep that never waits.
func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// committer returns a committer that retries without sleeping.
func committer(s objstore.Store, attempts int) *state.Committer {
	return state.NewCommitter(s, state.CommitOptions{MaxAttempts: attempts, Sleep: noSleep})
}

func podYAML(ns, name, image string) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  containers:\n  - image: %s\n    imagePullPolicy: Always\n    name: %s\n",
		name, ns, image, name)
}

func serviceYAML(ns, name string, port int) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  ports:\n  - port: %d\n  selector:\n    app: %s\n",
		name, ns, port, name)
}

// deployment builds a Deployment; service "" means none. As extraction
// does, a Pod with a Service names it in its podmin.dev/service
// annotation.
func deployment(ng, name, ns, image, service string) state.Deployment {
	d := state.Deployment{
		Key:       state.Key{NodeGroup: ng, Name: name},
		Namespace: ns,
		Pod:       podYAML(ns, name, image),
	}
	if service != "" {
		d.Pod = bytes.Replace(d.Pod, []byte("\nspec:"), fmt.Appendf(nil, "\n  annotations:\n    podmin.dev/service: %s\nspec:", service), 1)
		d.ServiceName, d.Service = service, serviceYAML(ns, service, 443)
	}
	return d
}

// readIndex reads the committed index or fails the test.
func readIndex(t testing.TB, s objstore.Store) *state.Index {
	t.Helper()
	ix, _, err := state.ReadIndex(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// fakeInterleaving runs hooks around index writes so a test can script what
// another writer does inside the window of one write: before runs first and
// may fail the write without making it, after runs once the write landed and
// may replace its result with an error. faultstore covers faults by rule and
// probability; this covers the interleavings it cannot express.
type fakeInterleaving struct {
	objstore.Store
	mu     sync.Mutex
	before func(n int) error // n counts index writes from 1
	after  func(n int) error
	n      int
}

func (h *fakeInterleaving) indexWrite(ctx context.Context, key string, write func() (string, error)) (string, error) {
	if key != state.IndexPath {
		return write()
	}
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	if h.before != nil {
		if err := h.before(n); err != nil {
			return "", err
		}
	}
	etag, err := write()
	if err == nil && h.after != nil {
		if aerr := h.after(n); aerr != nil {
			return "", aerr
		}
	}
	return etag, err
}

func (h *fakeInterleaving) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return h.indexWrite(ctx, key, func() (string, error) { return h.Store.PutIfAbsent(ctx, key, data) })
}

func (h *fakeInterleaving) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return h.indexWrite(ctx, key, func() (string, error) { return h.Store.PutIfMatch(ctx, key, data, etag) })
}

// Open streams reads from the inner store.
func (h *fakeInterleaving) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return objstore.OpenObject(ctx, h.Store, key, opts)
}

// Write passes index writes with options (metadata) through the hooks.
func (h *fakeInterleaving) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	return h.indexWrite(ctx, key, func() (string, error) { return objstore.WriteObject(ctx, h.Store, key, body, size, opts) })
}

var errLost = errors.New("connection reset: response lost")

// The wrappers must stream, or index writes would lose their write IDs.
var (
	_ objstore.Streamer = (*fakeInterleaving)(nil)
	_ objstore.Streamer = (*fakeHistory)(nil)
	_ objstore.Streamer = (*lateLoss)(nil)
)
