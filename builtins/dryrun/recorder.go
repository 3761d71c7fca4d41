// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/cache"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/objstore/overlay"
)

// Kinds of changed things.
const (
	KindObject = "object"
	KindBucket = "bucket"
	// KindBucketTags are a bucket's tags.
	KindBucketTags = "bucket-tags"
	KindSecret     = "secret"
	KindContexts   = "contexts"
	KindFile       = "file"
	KindDir        = "directory"
	KindImage      = "image"
)

// Actions of a change.
const (
	Created   = "created"
	Updated   = "updated"
	Deleted   = "deleted"
	Destroyed = "destroyed"
	Scheduled = "scheduled-for-deletion"
	Restored  = "restored"
)

// Change is the net effect on one thing between two marks: an object of a
// bucket, a bucket itself, a secret, the contexts file, a local file.
// Before and After are the contents (never a secret's value).
type Change struct {
	// Seq is the order of the change's first write.
	Seq uint64 `json:"-"`
	// Kind is object, bucket, secret, contexts, file, directory or image.
	Kind string `json:"kind"`
	// Where holds the thing: "bucket demo (local)", "secrets provider
	// local", a directory.
	Where string `json:"where"`
	// Target names the thing: an object key, a secret name, a path.
	Target string `json:"target"`
	// Action is created, updated, deleted, destroyed,
	// scheduled-for-deletion or restored.
	Action string `json:"action"`
	Before []byte `json:"-"`
	After  []byte `json:"-"`
}

// record is one write as a boundary saw it.
type record struct {
	seq                 uint64
	kind, where, target string
	before, after       state
	action              string // set by secrets, whose content is hidden
}

// state is a thing's content at one moment.
type state struct {
	exists bool
	data   []byte
}

// source is a recording boundary.
type source interface {
	records() []record
}

// Recorder owns the recording boundaries of one dry run.
type Recorder struct {
	seq  overlay.Sequence
	real *openv.Env
	now  func() time.Time

	mu      sync.Mutex
	sources []source
	buckets map[string]*bucketSource
	secrets map[string]*secretStore
	scratch string
}

// New returns a Recorder and the Env to run operations with: env's
// configuration over recording boundaries. Close the Recorder when done.
func New(env *openv.Env) (*Recorder, *openv.Env, error) {
	r := &Recorder{real: env, now: time.Now, buckets: map[string]*bucketSource{}, secrets: map[string]*secretStore{}}
	e := *env
	ctxs := &contextsFile{seq: &r.seq, real: env.Contexts}
	if ctxs.real == nil {
		ctxs.real = openv.ConfigContexts{Dir: env.Dirs.Config}
	}
	e.Contexts = ctxs
	files := &fileLayer{seq: &r.seq, real: env.Files}
	if files.real == nil {
		files.real = openv.OSFiles{}
	}
	e.Files = files
	r.sources = append(r.sources, ctxs, files)
	e.Providers = map[string]cloud.Provider{}
	for name, p := range env.Providers {
		e.Providers[name] = &provider{Provider: p, r: r}
	}
	if env.Secrets != nil {
		e.Secrets = r.openSecrets
	}
	if env.Infrastructure != nil {
		inf := &infraSource{r: r}
		e.Infrastructure = inf.wrap(env.Infrastructure)
		r.sources = append(r.sources, inf)
	}
	if env.Progress != nil {
		// The operations report what they do; in a dry run it only
		// happens in the overlay.
		e.Progress = func(msg string) { env.Progress("dry run: " + msg) }
	}
	if e.Commit.Cache == nil && env.Dirs.Cache != "" {
		// Before Dirs.Cache moves to the scratch copy below.
		e.Commit.Cache = readOnlyCache{real: cache.Open(filepath.Join(env.Dirs.Cache, "objects"), env.CacheMaxBytes)}
	}
	images, err := r.imageScratch(env.Dirs.Cache)
	if err != nil {
		return nil, nil, err
	}
	e.Dirs.Cache = images.cache
	r.sources = append(r.sources, images)
	// Generated files the operation removes from the cache (disconnect's
	// module directory) are the real cache's.
	files.cache = func(p string) string {
		if rel, err := filepath.Rel(images.cache, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.Join(env.Dirs.Cache, rel)
		}
		return p
	}
	return r, &e, nil
}

// Close removes the dry run's scratch directory. It is safe to call more
// than once.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.scratch == "" {
		return nil
	}
	err := os.RemoveAll(r.scratch)
	r.scratch = ""
	return err
}

// ScratchDir is the dry run's scratch directory (the local image store's
// copy); Close removes it.
func (r *Recorder) ScratchDir() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.scratch
}

// Mark returns the position of the last write so far; Changes between two
// marks are the writes made in between.
func (r *Recorder) Mark() uint64 {
	for _, s := range r.allSources() {
		if m, ok := s.(marker); ok {
			m.mark()
		}
	}
	return r.seq.Current()
}

// marker is a source that detects its writes by comparing snapshots (the
// local image store) and must look at each mark.
type marker interface {
	mark()
}

func (r *Recorder) allSources() []source {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]source(nil), r.sources...)
}

// Changes returns the net changes made after mark from and up to mark to
// (0 means now), in the order of their first write. A thing written and
// then restored (connect's probe object) is no change.
func (r *Recorder) Changes(from, to uint64) []Change {
	if to == 0 {
		to = ^uint64(0)
	}
	type group struct {
		first, last record
		actions     []string
	}
	groups := map[string]*group{}
	for _, s := range r.allSources() {
		for _, rec := range s.records() {
			if rec.seq <= from || rec.seq > to {
				continue
			}
			k := rec.kind + "\x00" + rec.where + "\x00" + rec.target
			g := groups[k]
			if g == nil {
				g = &group{first: rec}
				groups[k] = g
			}
			if rec.seq < g.first.seq {
				g.first = rec
			}
			if rec.seq >= g.last.seq {
				g.last = rec
			}
			g.actions = append(g.actions, rec.action)
		}
	}
	var out []Change
	for _, g := range groups {
		c := Change{Seq: g.first.seq, Kind: g.first.kind, Where: g.first.where, Target: g.first.target,
			Before: g.first.before.data, After: g.last.after.data}
		b, a := g.first.before, g.last.after
		switch {
		case g.first.kind == KindSecret:
			c.Action = netSecretAction(g.first, g.last, len(g.actions))
			c.Before, c.After = nil, nil
		case !b.exists && !a.exists:
		case !b.exists:
			c.Action = Created
		case !a.exists:
			c.Action = Deleted
		case !bytes.Equal(b.data, a.data):
			c.Action = Updated
		}
		if c.Action != "" {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}
