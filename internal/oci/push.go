// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/backoff"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/progress"
	"podmin.dev/podmin/internal/state"
)

// PushOptions tune Push; the zero value uses the defaults.
type PushOptions struct {
	// Concurrency bounds simultaneous blob uploads (default 4).
	Concurrency int
	// MaxAttempts bounds the index.json compare-and-swap loop (default 10).
	MaxAttempts int
	// Progress, when set, is called after each blob with the running totals.
	Progress func(PushProgress)
	// Backoff returns the wait after CAS attempt n (n ≥ 1) lost; nil is
	// defaultPushBackoff.
	Backoff func(n int) time.Duration
	// Sink, when set, shows the blob uploads (bytes, rate, time left)
	// under Title.
	Sink  progress.Sink
	Title string
}

// PushProgress are the running totals of a push.
type PushProgress struct {
	// Done and Total count blobs; Uploaded counts those actually written.
	Done, Total, Uploaded int
	// Bytes is the size of the uploaded blobs so far.
	Bytes int64
}

// PushResult reports what a push did.
type PushResult struct {
	// Descriptor is the pushed index as the destination tag names it.
	Descriptor v1.Descriptor
	// Blobs is the number of blobs the image references (manifests included).
	Blobs int
	// Uploaded and UploadedBytes count blobs the bucket did not have yet.
	Uploaded      int
	UploadedBytes int64
	// IndexUpdated is false when index.json already said the same.
	IndexUpdated bool
}

// Push copies the index top and everything it references from src into
// the bucket layout dst and tags it there. Blobs go first (existing ones
// are skipped after a Head), then oci-layout, then index.json is merged
// with compare-and-swap, so readers never see a tag whose blobs are
// missing and concurrent pushes to one repository keep each other's tags.
func Push(ctx context.Context, bucket objstore.Store, src Source, top v1.Descriptor, dst state.OCILayout, tag string, opts PushOptions) (PushResult, error) {
	if !top.MediaType.IsIndex() {
		return PushResult{}, fmt.Errorf("push %s: only image indexes are pushed, got %s: build or pull the image again", top.Digest, top.MediaType)
	}
	g, err := Walk(ctx, src, top)
	if err != nil {
		return PushResult{}, fmt.Errorf("read the image to push: %w", err)
	}
	res := PushResult{Descriptor: top, Blobs: len(g.Blobs)}
	var total int64
	for _, d := range g.Blobs {
		total += d.Size
	}
	t := progress.Or(opts.Sink).Begin(opts.Title, total)
	res.Uploaded, res.UploadedBytes, err = uploadBlobs(ctx, bucket, src, dst, g.Blobs, opts, t)
	t.End(err)
	if err != nil {
		return res, err
	}
	if err := writeLayoutFile(ctx, bucket, dst); err != nil {
		return res, err
	}
	res.IndexUpdated, err = publish(ctx, bucket, dst, tag, top, g.Nested, opts)
	return res, err
}

// writeLayoutFile creates oci-layout once; a re-push only reads it.
func writeLayoutFile(ctx context.Context, bucket objstore.Store, dst state.OCILayout) error {
	key := dst.LayoutFile()
	_, err := bucket.Head(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		_, err = bucket.PutIfAbsent(ctx, key, []byte(LayoutFileContent))
		if errors.Is(err, objstore.ErrPrecondition) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w: run the push again", key, err)
	}
	return nil
}

// uploadBlobs writes the blobs the bucket lacks with bounded concurrency;
// the first error cancels the rest.
func uploadBlobs(ctx context.Context, bucket objstore.Store, src Source, dst state.OCILayout, blobs []v1.Descriptor, opts PushOptions, t progress.Transfer) (int, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := opts.Concurrency
	if workers <= 0 {
		workers = 4
	}
	var (
		mu       sync.Mutex
		firstErr error
		p        = PushProgress{Total: len(blobs)}
		wg       sync.WaitGroup
		next     = make(chan v1.Descriptor)
	)
	for range min(workers, len(blobs)) {
		wg.Go(func() {
			for d := range next {
				uploaded, err := uploadBlob(ctx, bucket, src, dst, d, t)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				p.Done++
				if uploaded {
					p.Uploaded++
					p.Bytes += d.Size
				}
				if opts.Progress != nil && err == nil {
					opts.Progress(p)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for _, d := range blobs {
		select {
		case next <- d:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return p.Uploaded, p.Bytes, firstErr
}

func uploadBlob(ctx context.Context, bucket objstore.Store, src Source, dst state.OCILayout, d v1.Descriptor, t progress.Transfer) (bool, error) {
	key, err := dst.BlobPath(d.Digest.String())
	if err != nil {
		return false, err
	}
	put := objstore.PutOptions{IfAbsent: true}
	if info, err := bucket.Head(ctx, key); err == nil {
		if blobInPlace(info, d) {
			t.Skip(d.Size)
			return false, nil
		}
		// A stored blob of another size, or whose store knows it holds
		// other content, is what the node registry refuses: replace it,
		// unless it changes meanwhile.
		put = objstore.PutOptions{IfMatch: info.ETag}
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return false, fmt.Errorf("check blob %s: %w", key, err)
	}
	it := t.Item(progress.ShortName(d.Digest.String()), d.Size)
	defer it.Done()
	if err := writeBlobObject(ctx, bucket, src, key, d, put, it); err != nil {
		if errors.Is(err, objstore.ErrPrecondition) {
			return false, nil // another push wrote the blob first
		}
		if errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrNotFound) {
			return false, fmt.Errorf("upload blob %s: %w", key, err)
		}
		return false, fmt.Errorf("upload blob %s: %w: run the push again; blobs already uploaded are skipped", key, err)
	}
	return true, nil
}

// writeBlobObject writes key (under put's condition) from d's blob, streamed from src when it can
// be and verified on the way: a blob that does not match its descriptor
// fails the write before its last byte, so nothing is stored. it counts
// the bytes as the store takes them.
func writeBlobObject(ctx context.Context, bucket objstore.Store, src Source, key string, d v1.Descriptor, put objstore.PutOptions, it progress.Item) error {
	o, ok := src.(BlobOpener)
	if !ok {
		data, err := src.Blob(ctx, d.Digest)
		if err != nil {
			return err
		}
		if err := Verify(data, d); err != nil {
			return fmt.Errorf("%w: %w", err, ErrDigestMismatch)
		}
		_, err = objstore.PutWithOptions(ctx, bucket, key, data, put)
		it.Add(int64(len(data)))
		return err
	}
	rc, size, err := o.OpenBlob(ctx, d.Digest)
	if err != nil {
		return err
	}
	if size != d.Size {
		rc.Close()
		return fmt.Errorf("blob %s is %d bytes, not %d as its descriptor says: %w: pull or build the image again", d.Digest, size, d.Size, ErrDigestMismatch)
	}
	body := PrefetchingVerifier(rc, d)
	defer body.Close()
	_, err = objstore.WriteObject(ctx, bucket, key, progress.Reader(it, body), d.Size, put)
	return err
}

// defaultPushBackoff spreads pushes that lost the index.json
// compare-and-swap to the same repository: 5 ms doubling to 80 ms,
// jittered so that they do not collide again.
var defaultPushBackoff = backoff.Policy{Min: 5 * time.Millisecond, Max: 80 * time.Millisecond, Rand: rand.Float64}

// publish merges tag → top (and the nested descriptors) into dst's
// index.json with compare-and-swap, rereading and remerging on conflict.
func publish(ctx context.Context, bucket objstore.Store, dst state.OCILayout, tag string, top v1.Descriptor, nested []v1.Descriptor, opts PushOptions) (bool, error) {
	attempts := opts.MaxAttempts
	if attempts <= 0 {
		attempts = 10
	}
	wait := opts.Backoff
	if wait == nil {
		wait = defaultPushBackoff.Delay
	}
	key := dst.IndexFile()
	for n := 1; n <= attempts; n++ {
		var cur objstore.Object
		var err error
		cur.Data, cur.ETag, err = ReadObject(ctx, bucket, key, MaxIndexSize)
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return false, fmt.Errorf("read %s: %w: remove unused tags from the repository or run the push again", key, err)
		}
		m, err := ParseIndex(cur.Data)
		if err != nil {
			return false, fmt.Errorf("%s: %w", key, err)
		}
		data, err := EncodeIndex(MergeTag(m, tag, top, nested))
		if err != nil {
			return false, fmt.Errorf("%s: %w", key, err)
		}
		if cur.ETag != "" && bytes.Equal(data, cur.Data) {
			return false, nil
		}
		if cur.ETag == "" {
			_, err = bucket.PutIfAbsent(ctx, key, data)
		} else {
			_, err = bucket.PutIfMatch(ctx, key, data, cur.ETag)
		}
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, objstore.ErrPrecondition) || (cur.ETag != "" && errors.Is(err, objstore.ErrNotFound)):
			// Another writer changed index.json: reread and merge again.
		default:
			return false, fmt.Errorf("write %s: %w: run the push again", key, err)
		}
		t := time.NewTimer(wait(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
	return false, fmt.Errorf("write %s: it changed under %d attempts in a row: other pushes to this repository are running; run the push again", key, attempts)
}
