// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// report appends result lines to the file scripts/e2e.sh summarises
// (envReport), and to the test log.
type report struct {
	t    *testing.T
	path string
	mu   sync.Mutex
}

func openReport(t *testing.T) *report { return &report{t: t, path: os.Getenv(envReport)} }

func (r *report) line(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t.Log(s)
	if r.path == "" {
		return
	}
	f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		r.t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, s); err != nil {
		r.t.Errorf("report: %v", err)
	}
}

// notRun reports that nothing could run, and why, and skips.
func (r *report) notRun(t *testing.T, why string) {
	r.line("e2e NOT RUN: " + why)
	t.Skip(why)
}

// proof is one numbered proof: its figures, and why it could not run.
type proof struct {
	*testing.T
	figures []string
	skipped string
}

// figure records one measured value of the proof.
func (p *proof) figure(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	p.figures = append(p.figures, s)
	p.Log(s)
}

// notRun ends the proof as one that cannot run here, saying why.
func (p *proof) notRun(why string) {
	p.skipped = why
	p.Skip(why)
}

// prove runs proof num and reports PASS, FAIL or NOT RUN with its figures.
func (r *report) prove(t *testing.T, num int, title string, fn func(p *proof)) bool {
	p := &proof{}
	start := time.Now()
	ok := t.Run(fmt.Sprintf("proof%d", num), func(t *testing.T) {
		p.T = t
		fn(p)
	})
	status := "PASS"
	switch {
	case p.skipped != "":
		status = "NOT RUN (" + p.skipped + ")"
	case !ok:
		status = "FAIL"
	}
	detail := strings.Join(p.figures, "; ")
	if detail == "" {
		detail = "-"
	}
	r.line(fmt.Sprintf("proof %d %s: %s [%s]: %s", num, status, title, time.Since(start).Round(10*time.Millisecond), detail))
	return ok && p.skipped == ""
}
