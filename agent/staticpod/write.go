// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/state"
)

// publishBatch is how many Pods publish prepares before it syncs their
// temporary files together and renames them; it bounds the open files.
const publishBatch = 64

// syncWorkers bounds the concurrent file syncs of a batch: concurrent
// syncs share the file system's journal commits, where one after the
// other each waits for its own.
const syncWorkers = 16

// pendingFile is a Pod's new file, written to a temporary file in the
// static Pod directory and still open, waiting for its sync and rename.
type pendingFile struct {
	pod *stagedPod
	dst string
	tmp *os.File
	err error // of the sync
}

// writeTemp writes the Pod's file to a temporary dot file in the same
// directory (kubelet ignores dot files) unless the live file already has
// exactly these bytes, in which case it returns nil.
func (r *Reconciler) writeTemp(sp *stagedPod) (*pendingFile, error) {
	p := sp.pod
	dst := filepath.Join(r.manifests, p.File)
	if cur, err := os.ReadFile(dst); err == nil && bytes.Equal(cur, p.YAML) {
		return nil, nil
	}
	tmp, err := paths.CreateTemp(r.manifests)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", dst, err)
	}
	if err := errors.Join(tmp.Chmod(0o644), write(tmp, p.YAML)); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return nil, fmt.Errorf("write %s: %w", dst, err)
	}
	return &pendingFile{pod: sp, dst: dst, tmp: tmp}, nil
}

func write(f *os.File, data []byte) error {
	_, err := f.Write(data)
	return err
}

// syncFiles syncs the data of every file with bounded concurrency and
// closes it; a failure is kept in the file's err.
func syncFiles(files []*pendingFile) {
	work := make(chan *pendingFile)
	var wg sync.WaitGroup
	for range min(syncWorkers, len(files)) {
		wg.Go(func() {
			for pf := range work {
				pf.err = errors.Join(pf.tmp.Sync(), pf.tmp.Close())
			}
		})
	}
	for _, pf := range files {
		work <- pf
	}
	close(work)
	wg.Wait()
}

// discard removes temporary files that will not be renamed.
func discard(files []*pendingFile) {
	for _, pf := range files {
		_ = pf.tmp.Close()
		_ = os.Remove(pf.tmp.Name())
	}
}

// renameFiles renames each synced file into place, in order. A file that
// failed to sync or rename is its Pod's failure. A Step fault ends the
// pass as a crash would: the synced temporary files stay behind for the
// next pass to remove. Ending for ctx removes the rest, except the files
// whose old file stopReplaced removed: those are still renamed.
func (r *Reconciler) renameFiles(ctx context.Context, c *candidate, files []*pendingFile, res *Result) error {
	removed := r.stopReplaced(ctx, files)
	var ended error
	for _, pf := range files {
		p := pf.pod.pod
		if err := ctx.Err(); err != nil && !removed[pf] {
			discard([]*pendingFile{pf})
			ended = err
			continue
		}
		if pf.err != nil {
			_ = os.Remove(pf.tmp.Name())
			pf.pod.failed = true
			c.fail(r, p.Key, state.ErrorFile, p.Revision, fmt.Errorf("write %s: %w", pf.dst, pf.err))
			continue
		}
		if err := r.step(StepRename, p.File); err != nil {
			return err
		}
		if err := os.Rename(pf.tmp.Name(), pf.dst); err != nil {
			_ = os.Remove(pf.tmp.Name())
			pf.pod.failed = true
			c.fail(r, p.Key, state.ErrorFile, p.Revision, fmt.Errorf("write %s: %w", pf.dst, err))
			continue
		}
		r.unsynced = true
		res.Written++
		r.log.Info("static Pod written", "deployment", p.Key.String(), "file", p.File, "revision", p.Revision)
	}
	return ended
}
