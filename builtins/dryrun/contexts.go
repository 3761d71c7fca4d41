// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore/overlay"
)

// contextsFile records contexts changes in memory.
type contextsFile struct {
	seq  *overlay.Sequence
	real openv.ContextsFile

	mu   sync.Mutex
	cur  *contexts.File // nil until the first change
	recs []record
}

func cloneContexts(f *contexts.File) *contexts.File {
	c := &contexts.File{Current: f.Current, Contexts: map[string]contexts.Context{}}
	for k, v := range f.Contexts {
		c.Contexts[k] = v
	}
	return c
}

// Load implements openv.ContextsFile.
func (c *contextsFile) Load() (*contexts.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.load()
}

func (c *contextsFile) load() (*contexts.File, error) {
	if c.cur != nil {
		return cloneContexts(c.cur), nil
	}
	return c.real.Load()
}

// Update implements openv.ContextsFile.
func (c *contextsFile) Update(fn func(*contexts.File) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.load()
	if err != nil {
		return err
	}
	before := state{exists: c.cur != nil || c.realExists(), data: encodeContexts(f)}
	if !before.exists {
		before.data = nil
	}
	if err := fn(f); err != nil {
		return err
	}
	after := encodeContexts(f)
	if before.exists && bytes.Equal(before.data, after) {
		return nil
	}
	c.cur = cloneContexts(f)
	c.recs = append(c.recs, record{seq: c.seq.Next(), kind: KindContexts, where: "this machine", target: contexts.FileName,
		before: before, after: state{exists: true, data: after}})
	return nil
}

// realExists reports whether the real contexts file exists; a boundary
// other than the config directory's file always counts as existing.
func (c *contextsFile) realExists() bool {
	cc, ok := c.real.(openv.ConfigContexts)
	if !ok {
		return true
	}
	_, err := os.Stat(filepath.Join(cc.Dir, contexts.FileName))
	return err == nil
}

func (c *contextsFile) records() []record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]record(nil), c.recs...)
}

// encodeContexts is the contexts file as it would be saved.
func encodeContexts(f *contexts.File) []byte {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return []byte(err.Error())
	}
	return append(b, '\n')
}
