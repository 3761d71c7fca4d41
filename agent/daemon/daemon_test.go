// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/health"
)

type fakeComponent struct {
	name string
	log  *[]string
	mu   *sync.Mutex
	fail error
}

func (f fakeComponent) Name() string { return f.name }
func (f fakeComponent) record(s string) {
	f.mu.Lock()
	*f.log = append(*f.log, s)
	f.mu.Unlock()
}
func (f fakeComponent) Start(context.Context) error { f.record("start " + f.name); return f.fail }
func (f fakeComponent) Stop(context.Context) error  { f.record("stop " + f.name); return nil }

// SIGTERM stops reconciliation first, waits the DNS TTL margin while still
// serving and not ready, then stops the serving components.
func TestDaemonShutdownOrder(t *testing.T) {
	var log []string
	var mu sync.Mutex
	c := func(name string) fakeComponent { return fakeComponent{name: name, log: &log, mu: &mu} }
	h := health.NewHealth()
	d := &Daemon{
		Serving: []Component{c("health"), c("dns")}, Reconcilers: []Component{c("staticpod"), c("pods")},
		Health: h, TTLMargin: 5 * time.Second,
		Sleep: func(_ context.Context, dur time.Duration) error {
			ok, reasons := h.Ready()
			mu.Lock()
			log = append(log, "wait "+dur.String())
			mu.Unlock()
			if ok || !slices.Contains(reasons, "agent: shutting down") {
				t.Errorf("ready during the TTL margin: %v", reasons)
			}
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"start health", "start dns", "start staticpod", "start pods", "stop pods", "stop staticpod", "wait 5s", "stop dns", "stop health"}
	if !slices.Equal(log, want) {
		t.Fatalf("order %q\nwant  %q", log, want)
	}

	log = nil
	bad := c("pods")
	bad.fail = errors.New("no socket")
	d = &Daemon{Serving: []Component{c("health")}, Reconcilers: []Component{c("staticpod"), bad}}
	if err := d.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "start pods: no socket") {
		t.Fatalf("err %v", err)
	}
	if want := []string{"start health", "start staticpod", "start pods", "stop staticpod", "stop health"}; !slices.Equal(log, want) {
		t.Fatalf("order %q", log)
	}
}

type fakeDrainer struct {
	fakeComponent
	took     time.Duration
	deadline *time.Duration
}

func (f fakeDrainer) Drain(ctx context.Context) error {
	d, _ := ctx.Deadline()
	*f.deadline = time.Until(d)
	f.record("drain " + f.name)
	time.Sleep(f.took)
	return nil
}

// SIGTERM drains once reconciliation stopped, within the TTL margin, and
// the margin's wait counts the drain: shutdown stays bounded by it.
func TestDaemonDrainsWithinTheTTLMargin(t *testing.T) {
	var log []string
	var mu sync.Mutex
	c := func(name string) fakeComponent { return fakeComponent{name: name, log: &log, mu: &mu} }
	var bound time.Duration
	var waited time.Duration
	d := &Daemon{
		Serving:     []Component{c("dns"), fakeDrainer{fakeComponent: c("coordinator"), took: 300 * time.Millisecond, deadline: &bound}},
		Reconcilers: []Component{c("staticpod")}, Health: health.NewHealth(), TTLMargin: 5 * time.Second,
		Sleep: func(_ context.Context, dur time.Duration) error {
			waited = dur
			mu.Lock()
			log = append(log, "wait")
			mu.Unlock()
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"start dns", "start coordinator", "start staticpod", "stop staticpod", "drain coordinator", "wait", "stop coordinator", "stop dns"}
	if !slices.Equal(log, want) {
		t.Fatalf("order %q\nwant  %q", log, want)
	}
	if bound <= 4*time.Second || bound > 5*time.Second {
		t.Errorf("drain deadline %s, want the 5 s margin", bound)
	}
	if waited < 4*time.Second || waited > 5*time.Second-300*time.Millisecond {
		t.Errorf("waited %s after a 300ms drain, want the rest of the 5 s margin", waited)
	}
}
