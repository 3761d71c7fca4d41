// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package scrub

import (
	"io"
	"sync"
)

// Writer scrubs everything written to it before passing it on. A value
// split across two writes is still caught: the tail of a write that could
// begin a registered value is held back until the next write or Flush;
// text that cannot is never delayed. Writer is safe for concurrent use.
type Writer struct {
	r       *Registry
	w       io.Writer
	mu      sync.Mutex
	pending string
}

// NewWriter returns a Writer that scrubs with r and writes to w.
func NewWriter(r *Registry, w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Write scrubs p and writes what can be decided now. It reports len(p)
// written when the underlying write succeeds.
func (sw *Writer) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	s := sw.pending + string(p)
	sw.pending = ""
	if sw.r.Len() == 0 {
		_, err := io.WriteString(sw.w, s)
		return len(p), err
	}
	out := sw.r.String(s)
	if hold := sw.r.pendingPrefix(out); hold > 0 {
		sw.pending, out = out[len(out)-hold:], out[:len(out)-hold]
	}
	if out != "" {
		if _, err := io.WriteString(sw.w, out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what was held back.
func (sw *Writer) Flush() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.pending == "" {
		return nil
	}
	s := sw.pending
	sw.pending = ""
	_, err := io.WriteString(sw.w, sw.r.String(s))
	return err
}
