// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/syncio"
)

var t0 = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock shared by the agents of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logBuffer collects log lines from concurrent goroutines.
type logBuffer = syncio.Buffer

// leaderFlag is a Leader whose answer the test sets.
type leaderFlag struct {
	mu sync.Mutex
	on bool
}

func (l *leaderFlag) IsLeader() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.on }
func (l *leaderFlag) set(on bool)    { l.mu.Lock(); l.on = on; l.mu.Unlock() }

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	v, err := pki.GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := pki.ParseWorkloadKey(v)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newBucket(t testing.TB) objstore.Store {
	t.Helper()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

type agentOpts struct {
	store    Objects
	key      ed25519.PrivateKey
	clock    *clock
	leader   Leader
	external *External
	log      *logBuffer
	root     string
}

func newManager(t testing.TB, o agentOpts) *Manager {
	t.Helper()
	return newManagerWith(t, o)
}

// newManagerWith is newManager with options tweaked.
func newManagerWith(t testing.TB, o agentOpts, tweak ...func(*Options)) *Manager {
	t.Helper()
	if o.root == "" {
		o.root = t.TempDir()
	}
	if o.log == nil {
		o.log = &logBuffer{}
	}
	if o.leader == nil {
		o.leader = Always{}
	}
	opts := Options{
		Store: o.store, Cluster: "demo", Root: o.root, Key: o.key, Leader: o.leader,
		External: o.external, Now: o.clock.Now,
		Log: slog.New(slog.NewTextHandler(o.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range tweak {
		f(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustRefresh(t testing.TB, m *Manager) bool {
	t.Helper()
	changed, err := m.Refresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

// rnd reads crypto/rand.
type rnd struct{}

func (rnd) Read(p []byte) (int, error) { return rand.Read(p) }

// staticReader is a KeyReader holding one value.
type staticReader string

func (s staticReader) Read(context.Context, secrets.Name) (secrets.Value, error) {
	return secrets.Value(s), nil
}
