// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package progresstest

import (
	"fmt"
	"strings"
	"sync"

	"podmin.dev/podmin/internal/progress"
)

// Recorder is a progress.Sink that keeps every transfer it was given.
type Recorder struct {
	mu        sync.Mutex
	transfers []*Transfer
}

var _ progress.Sink = (*Recorder)(nil)

// Transfer is what one transfer reported.
type Transfer struct {
	r *Recorder
	// Title and Total are Begin's arguments.
	Title string
	Total int64
	// Moved, Skipped, Items and Done sum the transfer's reports.
	Moved, Skipped int64
	Items, Done    int
	// Ended and Err are set by End.
	Ended bool
	Err   error
}

// Begin implements progress.Sink.
func (r *Recorder) Begin(title string, total int64) progress.Transfer {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &Transfer{r: r, Title: title, Total: total}
	r.transfers = append(r.transfers, t)
	return t
}

// Transfers returns copies of the transfers so far, in the order they
// began.
func (r *Recorder) Transfers() []Transfer {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Transfer, len(r.transfers))
	for i, t := range r.transfers {
		out[i] = *t
	}
	return out
}

// String lists every transfer, for a failure message.
func (r *Recorder) String() string {
	var b strings.Builder
	for _, t := range r.Transfers() {
		fmt.Fprintf(&b, "%s: total %d, moved %d, skipped %d, %d/%d items done, ended %v (%v)\n", t.Title, t.Total, t.Moved, t.Skipped, t.Done, t.Items, t.Ended, t.Err)
	}
	return b.String()
}

// Item implements progress.Transfer.
func (t *Transfer) Item(string, int64) progress.Item {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	t.Items++
	return item{t}
}

// Skip implements progress.Transfer.
func (t *Transfer) Skip(n int64) { t.r.mu.Lock(); t.Skipped += n; t.r.mu.Unlock() }

// End implements progress.Transfer.
func (t *Transfer) End(err error) {
	t.r.mu.Lock()
	t.Ended, t.Err = true, err
	t.r.mu.Unlock()
}

type item struct{ t *Transfer }

func (i item) Add(n int64) { i.t.r.mu.Lock(); i.t.Moved += n; i.t.r.mu.Unlock() }
func (i item) Done()       { i.t.r.mu.Lock(); i.t.Done++; i.t.r.mu.Unlock() }
