// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"podmin.dev/podmin/internal/state"
)

// IndexWatcher notices commits to a local bucket's deployments/index.json
// within milliseconds, by watching its directory with the operating
// system's file notifications. It is a hint only: every notification asks
// for a pass, and the reconciler's poll remains the correctness path, so a
// missed or spurious event costs nothing but one conditional read.
type IndexWatcher struct {
	// Bucket is the local bucket's directory.
	Bucket string
	// Changed is called on every change of the index (coalesce it).
	Changed func()
	// Retry is how long to wait before watching again after the bucket
	// or its deployments directory could not be watched; 0 means 1 s.
	Retry time.Duration
	Log   *slog.Logger
}

// Run watches until ctx ends. It returns nil then: the poll goes on
// without it.
func (w *IndexWatcher) Run(ctx context.Context) error {
	log := w.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := w.Retry
	if retry <= 0 {
		retry = time.Second
	}
	index := filepath.Join(w.Bucket, filepath.FromSlash(state.IndexPath))
	dir := filepath.Dir(index)
	for {
		err := w.watch(ctx, index, dir)
		if ctx.Err() != nil {
			return nil
		}
		log.Debug("index change notifications paused: polling only", "dir", dir, "err", err, "retry_in", retry.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

// watch follows dir (or, until it exists, the bucket directory for its
// creation) until an error or ctx ends.
func (w *IndexWatcher) watch(ctx context.Context, index, dir string) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer fw.Close()
	watchingDir := false
	add := func() error {
		if err := fw.Add(dir); err == nil {
			watchingDir = true
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// No deployments/ yet: watch the bucket for its creation.
		return fw.Add(w.Bucket)
	}
	if err := add(); err != nil {
		return err
	}
	// A commit between the reconciler's last read and the watch being set
	// up would otherwise wait for the poll.
	w.Changed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("watcher closed")
			}
			return err
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("watcher closed")
			}
			switch {
			case ev.Name == index:
				w.Changed()
			case !watchingDir && ev.Name == dir && ev.Has(fsnotify.Create):
				if err := fw.Add(dir); err != nil {
					return err
				}
				watchingDir = true
				w.Changed()
			case watchingDir && ev.Name == dir && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)):
				// deployments/ (or the bucket) went away: start over.
				w.Changed()
				return errors.New(dir + " was removed")
			}
			if _, err := os.Stat(w.Bucket); err != nil {
				w.Changed()
				return err
			}
		}
	}
}
