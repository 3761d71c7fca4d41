// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/internal/clock"
)

// Component is one subsystem of the agent with a start/stop lifecycle.
// Start returns once the component runs (or failed to start); Stop ends it
// within ctx.
type Component interface {
	Name() string
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Daemon runs the agent's components. Serving components (health, DNS,
// the dataplane, the coordinator) start first and stop last; reconcilers
// (static Pods, the kubelet watcher) start after them and stop first, so
// SIGTERM stops new reconciliation, drains (serving Drainers), waits out
// the rest of the DNS TTL margin while still serving, and then stops the
// rest.
type Daemon struct {
	Serving     []Component
	Reconcilers []Component
	// Health is marked draining when shutdown begins.
	Health *health.Health
	// TTLMargin is the wait between stopping reconciliation and stopping
	// the serving components.
	TTLMargin time.Duration
	// Sleep waits d or until ctx ends; nil uses a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// StopTimeout bounds each component's Stop; 0 means 30 s.
	StopTimeout time.Duration
	Log         *slog.Logger
}

// Run starts every component, waits for ctx to end (SIGTERM), and shuts
// down in order. It returns an error only when a component fails to start
// or to stop.
func (d *Daemon) Run(ctx context.Context) error {
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	all := append(append([]Component{}, d.Serving...), d.Reconcilers...)
	for i, c := range all {
		if err := c.Start(ctx); err != nil {
			stopErr := d.stop(all[:i], log)
			return errors.Join(fmt.Errorf("start %s: %w", c.Name(), err), stopErr)
		}
		log.Info("component started", "component", c.Name())
	}
	<-ctx.Done()
	log.Info("stopping: no new reconciliation")
	err := d.stop(d.Reconcilers, log)
	if d.Health != nil {
		d.Health.Drain()
	}
	sleep := d.Sleep
	if sleep == nil {
		sleep = clock.Sleep
	}
	// Drain within the margin: the node leaves the cluster's snapshot
	// while DNS caches expire.
	drained := d.drain(log)
	log.Info("waiting the DNS TTL margin before exiting", "margin", d.TTLMargin.String())
	_ = sleep(context.Background(), max(d.TTLMargin-drained, 0))
	err = errors.Join(err, d.stop(d.Serving, log))
	log.Info("stopped")
	return err
}

// stop stops cs in reverse order, each within StopTimeout.
func (d *Daemon) stop(cs []Component, log *slog.Logger) error {
	timeout := d.StopTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if err := cs[i].Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", cs[i].Name(), err))
		}
		cancel()
		log.Info("component stopped", "component", cs[i].Name())
	}
	return errors.Join(errs...)
}

// Drainer is a serving Component that can take the node out of service
// before it stops (the coordinator: its endpoints leave the cluster's
// snapshot).
type Drainer interface {
	Drain(ctx context.Context) error
}

// drain runs every serving Drainer within the TTL margin and returns how
// long it took; the margin's wait counts it.
func (d *Daemon) drain(log *slog.Logger) time.Duration {
	start := time.Now()
	// A margin shortened below a second (tests) still leaves the drain,
	// a few requests, a second.
	bound := max(d.TTLMargin, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	ran := false
	for _, c := range d.Serving {
		dr, ok := c.(Drainer)
		if !ok {
			continue
		}
		ran = true
		if err := dr.Drain(ctx); err != nil {
			log.Warn("drain failed: the node's endpoints expire from the cluster after the lease window", "component", c.Name(), "err", err)
			continue
		}
		log.Info("drained", "component", c.Name(), "took", time.Since(start).String())
	}
	if !ran {
		return 0
	}
	return time.Since(start)
}

// loop adapts a function that runs until its context ends to a Component.
type loop struct {
	name   string
	run    func(ctx context.Context) error
	cancel context.CancelFunc
	done   chan error
}

// Loop returns a Component that runs run in a goroutine from Start until
// Stop cancels it.
func Loop(name string, run func(ctx context.Context) error) Component {
	return &loop{name: name, run: run}
}

func (l *loop) Name() string { return l.name }

func (l *loop) Start(ctx context.Context) error {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel, l.done = cancel, make(chan error, 1)
	go func() { l.done <- l.run(rctx) }()
	return nil
}

func (l *loop) Stop(ctx context.Context) error {
	if l.cancel == nil {
		return nil
	}
	l.cancel()
	select {
	case err := <-l.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s did not stop in time: %w", l.name, ctx.Err())
	}
}

// hook is a Component that only calls a function when it starts.
type hook struct {
	name string
	fn   func()
}

// Hook returns a Component that calls fn when it starts, after every
// component listed before it started.
func Hook(name string, fn func()) Component { return &hook{name: name, fn: fn} }

func (h *hook) Name() string                { return h.name }
func (h *hook) Start(context.Context) error { h.fn(); return nil }
func (h *hook) Stop(context.Context) error  { return nil }
