// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/scrub"
)

// MaxHistory is how many lines the REPL history keeps.
const MaxHistory = 1000

// History is the REPL's history file. It is the Podmin process's own file,
// mode 0600, rewritten atomically, and never holds a line that contains a
// registered secret value: a line is checked when it is added and every
// kept line again on each write, so a line typed before its value became a
// secret (x = "…" and later podmin.secret(x)) is dropped too.
type History struct {
	path  string
	reg   *scrub.Registry
	mu    sync.Mutex
	lines []string
}

// OpenHistory reads the history at path, creating nothing yet. An existing
// file is tightened to mode 0600.
func OpenHistory(path string, reg *scrub.Registry) (*History, error) {
	h := &History{path: path, reg: reg}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return h, nil
	case err != nil:
		return nil, fmt.Errorf("read the REPL history: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("REPL history %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.TrimSpace(line) != "" {
			h.lines = append(h.lines, line)
		}
	}
	if len(h.lines) > MaxHistory {
		h.lines = h.lines[len(h.lines)-MaxHistory:]
	}
	return h, nil
}

// Lines returns the kept lines, oldest first.
func (h *History) Lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lines...)
}

// Add records the lines of one input and rewrites the file. An input any
// of whose lines — or whose text as a whole — holds a registered value is
// left out entirely. It returns the lines it kept.
func (h *History) Add(lines []string) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var kept []string
	if !h.reg.Contains(strings.Join(lines, "\n")) {
		for _, l := range lines {
			if strings.TrimSpace(l) != "" && !h.reg.Contains(l) {
				kept = append(kept, l)
			}
		}
	}
	all := append(h.lines, kept...)
	h.lines = h.lines[:0:0]
	for _, l := range all {
		if !h.reg.Contains(l) {
			h.lines = append(h.lines, l)
		}
	}
	if len(h.lines) > MaxHistory {
		h.lines = h.lines[len(h.lines)-MaxHistory:]
	}
	var b strings.Builder
	for _, l := range h.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if err := paths.EnsureDir(filepath.Dir(h.path)); err != nil {
		return kept, err
	}
	return kept, paths.WriteFileAtomic(h.path, []byte(b.String()), 0o600)
}
