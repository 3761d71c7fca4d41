// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pods

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// SocketPath is kubelet's Pods API socket, relative to the node root.
const SocketPath = "/var/lib/kubelet/pods-api/pods-api.sock"

// Options configure a Watcher.
type Options struct {
	// Socket is the absolute path of kubelet's Pods API socket.
	Socket string
	// Refresh receives the node's complete Pod set after each coalesced
	// batch of updates, and after every relist. It must not block long.
	Refresh func(pods []*corev1.Pod)
	// Lost, when set, is told that kubelet stopped answering: the watch
	// ended and a relist failed. Refresh follows when it answers again.
	Lost func(err error)
	// Relist is the period of relisting while the watch stream is down;
	// 0 means 10 s.
	Relist time.Duration
	// After returns a channel that fires after d (time.After by default).
	After func(d time.Duration) <-chan time.Time
	// Log receives connection changes; nil discards them.
	Log *slog.Logger
}

// Watcher follows kubelet's Pods. Its methods are safe for concurrent use.
type Watcher struct {
	opts  Options
	log   *slog.Logger
	mu    sync.Mutex
	pods  map[string]*corev1.Pod // by UID
	hints chan struct{}
}

// New returns a Watcher; Run starts it.
func New(opts Options) *Watcher {
	if opts.Relist <= 0 {
		opts.Relist = 10 * time.Second
	}
	if opts.After == nil {
		opts.After = time.After
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{opts: opts, log: log, pods: map[string]*corev1.Pod{}, hints: make(chan struct{}, 1)}
}

// Pods returns the current Pods.
func (w *Watcher) Pods() []*corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(w.pods))
	for _, p := range w.pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Select returns the ready Pods matching s.
func (w *Watcher) Select(s Selector) []Ready { return Select(w.Pods(), s) }

// hint records that the Pod set changed; hints coalesce.
func (w *Watcher) hint() {
	select {
	case w.hints <- struct{}{}:
	default:
	}
}

// Run watches until ctx ends. While the stream is down it relists every
// Relist period and retries the watch.
func (w *Watcher) Run(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+w.opts.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("kubelet Pods API at %s: %w", w.opts.Socket, err)
	}
	defer conn.Close()
	client := podsapi.NewPodsClient(conn)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.deliver(ctx) }()
	defer wg.Wait()
	for {
		start := time.Now()
		synced, err := w.watch(ctx, client)
		if ctx.Err() != nil {
			return nil
		}
		w.log.Warn("kubelet Pods API watch ended: relisting periodically until it is back", "socket", w.opts.Socket, "err", err)
		if err := w.relist(ctx, client); err != nil && ctx.Err() == nil {
			w.log.Warn("kubelet Pods API relist failed", "err", err)
			if w.opts.Lost != nil {
				w.opts.Lost(err)
			}
		}
		// A stream that synced and lasted a Relist period ended for a
		// reason of its own (kubelet drops a watcher that falls behind):
		// watch again at once rather than go blind for a period.
		if synced && time.Since(start) >= w.opts.Relist {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.opts.After(w.opts.Relist):
		}
	}
}

// deliver turns coalesced hints into Refresh calls.
func (w *Watcher) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.hints:
			if w.opts.Refresh != nil {
				w.opts.Refresh(w.Pods())
			}
		}
	}
}

// watch follows one WatchPods stream until it fails, and reports whether
// it synced. The stream's initial ADDED events rebuild the set, which
// replaces the old one at INITIAL_SYNC_COMPLETE. kubelet sends a DELETED
// event once a Pod has finished, with only its name, namespace and UID.
func (w *Watcher) watch(ctx context.Context, client podsapi.PodsClient) (synced bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.WatchPods(ctx, &podsapi.WatchPodsRequest{})
	if err != nil {
		return false, err
	}
	initial := map[string]*corev1.Pod{}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return synced, err
		}
		if ev.GetType() == podsapi.EventType_INITIAL_SYNC_COMPLETE {
			w.mu.Lock()
			w.pods, synced = initial, true
			w.mu.Unlock()
			w.log.Info("kubelet Pods API watch synced", "pods", len(initial))
			w.hint()
			continue
		}
		var p corev1.Pod
		if err := p.Unmarshal(ev.GetPod()); err != nil {
			return synced, fmt.Errorf("decode a Pod of a %s event: %w", ev.GetType(), err)
		}
		if !synced {
			if ev.GetType() != podsapi.EventType_DELETED {
				initial[string(p.UID)] = &p
			}
			continue
		}
		w.mu.Lock()
		switch ev.GetType() {
		case podsapi.EventType_DELETED:
			delete(w.pods, string(p.UID))
		case podsapi.EventType_ADDED, podsapi.EventType_MODIFIED:
			w.pods[string(p.UID)] = &p
		}
		w.mu.Unlock()
		w.hint()
	}
}

// relist replaces the set with one ListPods answer.
func (w *Watcher) relist(ctx context.Context, client podsapi.PodsClient) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := client.ListPods(ctx, &podsapi.ListPodsRequest{})
	if err != nil {
		return err
	}
	set := map[string]*corev1.Pod{}
	var errs []error
	for _, b := range resp.GetPods() {
		var p corev1.Pod
		if err := p.Unmarshal(b); err != nil {
			errs = append(errs, err)
			continue
		}
		set[string(p.UID)] = &p
	}
	if len(errs) > 0 {
		return fmt.Errorf("decode listed Pods: %w", errors.Join(errs...))
	}
	w.mu.Lock()
	w.pods = set
	w.mu.Unlock()
	w.hint()
	return nil
}

// SocketExists reports whether kubelet's Pods API socket exists beneath
// root.
func SocketExists(root string) bool {
	fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(SocketPath)))
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// NewKubelet watches the Pods API of the kubelet beneath root for the
// agent: report receives nil on every complete Pod set and, once kubelet
// stops answering, why the node is not ready; refresh receives each Pod
// set and lost the failure.
func NewKubelet(root string, log *slog.Logger, report func(error), refresh func([]*corev1.Pod), lost func(error)) *Watcher {
	return New(Options{
		Socket: filepath.Join(root, filepath.FromSlash(SocketPath)),
		Log:    log.With("component", "pods"),
		Refresh: func(ps []*corev1.Pod) {
			ready := 0
			for _, p := range ps {
				if IsReady(p) {
					ready++
				}
			}
			log.Debug("kubelet Pods refreshed", "pods", len(ps), "ready", ready)
			report(nil)
			refresh(ps)
		},
		Lost: func(err error) {
			report(fmt.Errorf("kubelet is down: its Pods API at %s does not answer: %w: check kubelet (systemctl status kubelet)", SocketPath, err))
			lost(err)
		},
	})
}
