// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Change is one mutating operation a dry run recorded instead of performing.
type Change struct {
	// Op is the builtin's short name: connect, use, disconnect, init,
	// deploy, delete.
	Op string `json:"op"`
	// Target is what changes: a cluster, a file, NODEGROUP/NAME.
	Target string `json:"target"`
	// Where is what would be written: the contexts file, a file path,
	// deployments/index.json in a bucket.
	Where string `json:"where"`
	// Detail says what the write would do.
	Detail string `json:"detail"`
}

// Plan is the ordered list of recorded changes of a dry run.
type Plan struct {
	mu      sync.Mutex
	changes []Change
}

func (p *Plan) add(c Change) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changes = append(p.changes, c)
}

// Changes returns the recorded changes in the order the script made them.
func (p *Plan) Changes() []Change {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Change(nil), p.changes...)
}

// Write prints the plan as a table (the default) or as JSON.
func (p *Plan) Write(w io.Writer, format string) error {
	changes := p.Changes()
	if format == "json" {
		if changes == nil {
			changes = []Change{}
		}
		b, err := json.MarshalIndent(struct {
			DryRun  bool     `json:"dryRun"`
			Changes []Change `json:"changes"`
		}{true, changes}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintln(w, "dry run: no changes planned; nothing was written")
		return err
	}
	fmt.Fprintf(w, "dry run: %d change(s) planned; nothing was written\n", len(changes))
	for i, c := range changes {
		if _, err := fmt.Fprintf(w, "  %d. %s %s: %s (%s)\n", i+1, c.Op, c.Target, c.Detail, c.Where); err != nil {
			return err
		}
	}
	return nil
}
