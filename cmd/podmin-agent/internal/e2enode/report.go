// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2enode

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Report appends result lines to the file a script summarises, and to
// the test log. The script reads "<name> NOT RUN: <why>" when nothing
// could run, "<name> proofs: N" before the proofs and one "proof <n>
// PASS|FAIL|NOT RUN (<why>): ..." line per proof.
type Report struct {
	t    *testing.T
	name string
	path string
	mu   sync.Mutex
}

// OpenReport returns the report of test t, named name ("e2e",
// "e2e-cluster"), appending to path ("" logs only).
func OpenReport(t *testing.T, name, path string) *Report {
	return &Report{t: t, name: name, path: path}
}

// Line appends one line.
func (r *Report) Line(s string) {
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

// Count announces how many proofs follow; a report with fewer proof lines
// is a run that broke off.
func (r *Report) Count(n int) { r.Line(fmt.Sprintf("%s proofs: %d", r.name, n)) }

// NotRun reports that nothing could run, and why, and skips t.
func (r *Report) NotRun(t *testing.T, why string) {
	r.Line(r.name + " NOT RUN: " + why)
	t.Skip(why)
}

// Proof is one numbered proof: its figures, what failed, and why it
// could not run.
type Proof struct {
	*testing.T
	figures  []string
	failures []string
	skipped  string
}

// Error, Errorf, Fatal and Fatalf fail the proof as testing.T's do, and
// keep the message for the report line.
func (p *Proof) Error(args ...any) { p.failed(fmt.Sprint(args...)); p.T.Error(args...) }

func (p *Proof) Errorf(format string, args ...any) {
	p.failed(fmt.Sprintf(format, args...))
	p.T.Errorf(format, args...)
}

func (p *Proof) Fatal(args ...any) { p.failed(fmt.Sprint(args...)); p.T.Fatal(args...) }

func (p *Proof) Fatalf(format string, args ...any) {
	p.failed(fmt.Sprintf(format, args...))
	p.T.Fatalf(format, args...)
}

// failedLimit bounds each failure message in the report line; the test
// log has it whole.
const failedLimit = 3000

func (p *Proof) failed(msg string) {
	msg = strings.Join(strings.Fields(msg), " ") // one line, as the scripts read it
	if len(msg) > failedLimit {
		msg = msg[:failedLimit] + "…"
	}
	p.failures = append(p.failures, msg)
}

// Figure records one measured value of the proof.
func (p *Proof) Figure(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	p.figures = append(p.figures, s)
	p.Log(s)
}

// NotRun ends the proof as one that cannot run here, saying why.
func (p *Proof) NotRun(why string) {
	p.skipped = why
	p.Skip(why)
}

// Prove runs proof num as a subtest of t and reports PASS, FAIL or NOT
// RUN with its figures; it reports whether the proof passed.
func (r *Report) Prove(t *testing.T, num string, title string, fn func(p *Proof)) bool {
	p := &Proof{}
	start := time.Now()
	ok := t.Run("proof"+num, func(t *testing.T) {
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
	if len(p.failures) > 0 {
		detail += "; FAILED: " + strings.Join(p.failures, "; ")
	}
	r.Line(fmt.Sprintf("proof %s %s: %s [%s]: %s", num, status, title, time.Since(start).Round(10*time.Millisecond), detail))
	return ok && p.skipped == ""
}
