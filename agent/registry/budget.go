// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"context"
	"sync"
)

// budget bounds the bytes that concurrent requests hold in memory at
// once: a request takes its share before it buffers and returns it when
// done; requests that do not fit wait their turn, first come first served.
type budget struct {
	mu    sync.Mutex
	max   int64
	free  int64
	queue []*waiter
}

type waiter struct {
	n     int64
	ready chan struct{}
}

func newBudget(max int64) *budget { return &budget{max: max, free: max} }

// take waits until n bytes (at most the whole budget) are free and takes
// them, or fails with ctx's error. It returns what was taken, for give.
func (b *budget) take(ctx context.Context, n int64) (int64, error) {
	n = min(n, b.max)
	b.mu.Lock()
	if len(b.queue) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return n, nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: hand it back
			b.mu.Unlock()
			b.give(n)
		default:
			for i, q := range b.queue {
				if q == w {
					b.queue = append(b.queue[:i], b.queue[i+1:]...)
					break
				}
			}
			b.grant() // a smaller waiter behind it may fit now
			b.mu.Unlock()
		}
		return 0, ctx.Err()
	}
}

// give returns n bytes taken with take.
func (b *budget) give(n int64) {
	b.mu.Lock()
	b.free += n
	b.grant()
	b.mu.Unlock()
}

// grant wakes the waiters at the head of the queue that fit; b.mu is held.
func (b *budget) grant() {
	for len(b.queue) > 0 && b.free >= b.queue[0].n {
		w := b.queue[0]
		b.queue = b.queue[1:]
		b.free -= w.n
		close(w.ready)
	}
}
