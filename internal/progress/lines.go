// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Lines shows transfers as plain lines, for logs: one when a transfer
// starts, one every Every while it runs (also when no byte moved, so a
// slow upload never looks hung), and one at the end. It never moves the
// cursor or redraws anything.
type Lines struct {
	// W receives the lines (standard error in the CLI).
	W io.Writer
	// Every is the shortest gap between two progress lines of one
	// transfer; zero means five seconds.
	Every time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex // serializes writes to W
}

func (l *Lines) every() time.Duration {
	if l.Every <= 0 {
		return 5 * time.Second
	}
	return l.Every
}

func (l *Lines) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Log writes one line, between the progress lines of running transfers.
func (l *Lines) Log(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.W, msg)
}

// Begin starts a transfer and announces it.
func (l *Lines) Begin(title string, total int64) Transfer {
	t := &lineTransfer{l: l, title: title, total: total, grow: total == 0, start: l.now(),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	t.last = t.start
	if total > 0 {
		l.Log(fmt.Sprintf("%s: %s to transfer", title, Size(total)))
	} else {
		l.Log(title + ": started")
	}
	go t.heartbeat()
	return t
}

type lineTransfer struct {
	l           *Lines
	title       string
	mu          sync.Mutex
	total, done int64
	grow        bool
	items       int
	start, last time.Time
	// stop ends the heartbeat; stopped says it has ended.
	stop, stopped chan struct{}
}

// heartbeat prints the status every Every that passed without a line.
func (t *lineTransfer) heartbeat() {
	defer close(t.stopped)
	tick := time.NewTicker(t.l.every())
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.add(0)
		}
	}
}

func (t *lineTransfer) Item(_ string, size int64) Item {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.grow {
		t.total += size
	}
	t.items++
	return &lineItem{t: t}
}

func (t *lineTransfer) Skip(size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.grow {
		t.total -= size
	}
}

// add records n bytes and prints a line when Every has passed.
func (t *lineTransfer) add(n int64) {
	t.mu.Lock()
	t.done += n
	now := t.l.now()
	if now.Sub(t.last) < t.l.every() {
		t.mu.Unlock()
		return
	}
	t.last = now
	line := t.status(now)
	t.mu.Unlock()
	t.l.Log(line)
}

// status renders "title: 128.0 MiB of 256.0 MiB (50%), 64.0 MiB/s, 2s left";
// t.mu is held.
func (t *lineTransfer) status(now time.Time) string {
	s := fmt.Sprintf("%s: %s", t.title, Size(t.done))
	if t.total > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", Size(t.total), t.done*100/t.total)
	}
	elapsed := now.Sub(t.start)
	if elapsed > 0 && t.done > 0 {
		rate := float64(t.done) / elapsed.Seconds()
		s += fmt.Sprintf(", %s/s", Size(int64(rate)))
		if t.total > t.done {
			s += ", " + Duration(time.Duration(float64(t.total-t.done)/rate*float64(time.Second))) + " left"
		}
	}
	return s
}

func (t *lineTransfer) End(err error) {
	close(t.stop)
	<-t.stopped
	t.mu.Lock()
	now := t.l.now()
	line := fmt.Sprintf("%s: done, %s in %s", t.title, Size(t.done), Duration(now.Sub(t.start)))
	if err != nil {
		line = fmt.Sprintf("%s: failed after %s", t.title, Size(t.done))
	}
	t.mu.Unlock()
	t.l.Log(line)
}

type lineItem struct{ t *lineTransfer }

func (i *lineItem) Add(n int64) { i.t.add(n) }
func (i *lineItem) Done()       {}
