// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sync"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/progress"
)

// DigestMetadata is the user metadata key holding an uploaded file's
// digest, so a repeated upload after an interruption can be skipped.
const DigestMetadata = "podmin-digest"

// PublishOptions configure Publish.
type PublishOptions struct {
	// Archs are the architectures of every NodeGroup and NAT64 instance.
	Archs []Arch
	// Files is the desired file set. Nil resolves the canonical set
	// (plus Features) for Archs with Resolver.
	Files []File
	// Resolver resolves when Files is nil.
	Resolver *Resolver
	// Features add optional dependencies when Files is nil (OTelLogs;
	// NAT64 is implied by NAT64Archs).
	Features []Feature
	// NAT64Archs are the NAT64 instances' architectures: the Jool
	// modules are resolved for them, for the kernels in Resolver.Kernels.
	NAT64Archs []Arch
	// AgentSource cross-compiles podmin-agent from a Podmin checkout
	// instead of resolving the published agent (--agent-source).
	AgentSource string

	// noAgent leaves podmin-agent out (a fetch dry run with an agent
	// source resolves without building).
	noAgent bool
	// Images are the image dependencies (normally the package's Images).
	// One the manifest already records at the same pinned source is kept
	// without any request; any other is published by Mirror, which
	// returns its manifest entry (OCIMirror is the standard one).
	Images []Image
	Mirror func(ctx context.Context, store objstore.Store, img Image) (ImageEntry, error)
	// Check, when set, verifies an image the manifest already records
	// (repairing legacy metadata); ErrImageMissing mirrors it again.
	Check func(ctx context.Context, store objstore.Store, img Image, e ImageEntry) error
	// Cache holds verified downloads; only pending files touch it.
	Cache *Cache
	// Concurrency bounds parallel uploads; zero is 4.
	Concurrency int
	// Attempts bounds manifest compare-and-swap attempts; zero is 5.
	Attempts int
	// Now is the retention clock; nil is time.Now.
	Now func() time.Time
	// Warn receives retention failures, which never fail Publish.
	Warn func(msg string)
	// Progress receives one line per upload.
	Progress func(msg string)
	// Transfers shows the uploads' bytes (bars on a terminal); nil shows
	// nothing. Downloads report to Cache.Transfers.
	Transfers progress.Sink
	// SkipRetention leaves older versions alone.
	SkipRetention bool
}

// PublishResult reports what Publish did.
type PublishResult struct {
	// Manifest is the published manifest and ETag its version.
	Manifest *Manifest
	ETag     string
	// Written reports that the manifest was (re)written.
	Written bool
	// Uploaded lists the object paths uploaded, Images the images
	// published, Deleted the objects retention removed.
	Uploaded, Images, Deleted []string
	// Attempts counts manifest compare-and-swap attempts.
	Attempts int
	// Files is the desired file set published: opts.Files, or what
	// Desired resolved. Passed back as PublishOptions.Files it publishes
	// the same set without asking the upstreams again.
	Files []File
}

// Selected returns the dependency definitions of the canonical set plus
// the optional features given.
func Selected(features []Feature) []Dependency {
	var out []Dependency
	for _, d := range Definitions {
		if d.Optional == Always || containsFeature(features, d.Optional) {
			out = append(out, d)
		}
	}
	return out
}

func containsFeature(fs []Feature, f Feature) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// Publish makes the bucket's dependencies/ hold the desired set: it reads
// the published manifest and its ETag, uploads only what differs (a
// matching manifest transfers nothing), writes the manifest last with
// compare-and-swap, retrying cleanly when another writer wins, and then
// applies retention.
func Publish(ctx context.Context, store objstore.Store, opts PublishOptions) (PublishResult, error) {
	var res PublishResult
	files := opts.Files
	if files == nil {
		var err error
		if files, err = Desired(ctx, opts); err != nil {
			return res, err
		}
	}
	res.Files = files
	attempts := opts.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	for res.Attempts < attempts {
		res.Attempts++
		cur, etag, err := ReadManifest(ctx, store)
		if err != nil {
			return res, err
		}
		desired, pending := plan(cur, files)
		var pendingImages []Image
		for _, img := range opts.Images {
			old, ok := curImage(cur, img)
			if ok && opts.Check != nil {
				err := opts.Check(ctx, store, img, old)
				if errors.Is(err, ErrImageMissing) {
					ok = false
				} else if err != nil {
					return res, fmt.Errorf("check image %s: %w", img.Source(), err)
				}
			}
			if ok {
				desired.Images[img.Key] = old
			} else {
				pendingImages = append(pendingImages, img)
			}
		}
		if cur != nil && len(pendingImages) == 0 && bytes.Equal(cur.Encode(), desired.Encode()) {
			res.Manifest, res.ETag = cur, etag
			break
		}
		uploaded, err := upload(ctx, store, opts, pending)
		res.Uploaded = append(res.Uploaded, uploaded...)
		if err != nil {
			return res, err
		}
		for _, f := range pending {
			// Sizes are exact now that the cache has the bytes.
			desired.Dependencies[f.Key][f.Arch] = withoutIdentity(f)
		}
		for _, img := range pendingImages {
			if opts.Mirror == nil {
				return res, fmt.Errorf("image %s is not published and no image mirror is configured", img.Source())
			}
			entry, err := opts.Mirror(ctx, store, img)
			if err != nil {
				return res, fmt.Errorf("publish image %s: %w", img.Source(), err)
			}
			desired.Images[img.Key] = entry
			res.Images = append(res.Images, img.Key)
		}
		data := desired.Encode()
		var newETag string
		if etag == "" {
			newETag, err = store.PutIfAbsent(ctx, ManifestKey, data)
		} else {
			newETag, err = store.PutIfMatch(ctx, ManifestKey, data, etag)
		}
		if errors.Is(err, objstore.ErrPrecondition) || (etag != "" && errors.Is(err, objstore.ErrNotFound)) {
			continue // another writer committed first: reread and redo
		}
		if err != nil {
			return res, fmt.Errorf("write %s: %w", ManifestKey, err)
		}
		res.Manifest, res.ETag, res.Written = desired, newETag, true
		break
	}
	if res.Manifest == nil {
		return res, fmt.Errorf("write %s: another writer changed it %d times in a row: %w", ManifestKey, res.Attempts, objstore.ErrPrecondition)
	}
	if !opts.SkipRetention {
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		res.Deleted = Retain(ctx, store, res.Manifest, now(), opts.Warn)
	}
	return res, nil
}

// Desired resolves the complete desired file set of opts: the canonical
// set and features for Archs, Jool for NAT64Archs, and the agent built
// from AgentSource when set (which needs Cache).
func Desired(ctx context.Context, opts PublishOptions) ([]File, error) {
	if opts.Resolver == nil {
		return nil, errors.New("publish dependencies: neither files nor a resolver given")
	}
	var files []File
	for _, d := range Selected(opts.Features) {
		if d.Optional == NAT64 || (d.Key == "podmin-agent" && (opts.AgentSource != "" || opts.noAgent)) {
			continue
		}
		fs, err := opts.Resolver.Resolve(ctx, d, opts.Archs)
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
	}
	if opts.AgentSource != "" {
		if opts.Cache == nil {
			return nil, errors.New("--agent-source needs the dependency cache")
		}
		for _, a := range opts.Archs {
			f, err := BuildAgent(ctx, opts.AgentSource, a, opts.Cache)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
	}
	if len(opts.NAT64Archs) > 0 {
		for _, d := range Definitions {
			if d.Optional != NAT64 {
				continue
			}
			fs, err := opts.Resolver.Resolve(ctx, d, opts.NAT64Archs)
			if err != nil {
				return nil, err
			}
			files = append(files, fs...)
		}
	}
	return files, nil
}

// curImage returns the published entry of img when it records the same
// pinned source at the same mirror path.
func curImage(cur *Manifest, img Image) (ImageEntry, bool) {
	if cur == nil {
		return ImageEntry{}, false
	}
	old, ok := cur.Images[img.Key]
	return old, ok && old.Source == img.Source() && old.Version == img.Version && old.Path == img.Path()
}

// plan returns the desired manifest and the files it does not already
// record. A recorded entry with the same path and digest is kept with its
// exact size, so a match needs no download to learn sizes.
func plan(cur *Manifest, files []File) (*Manifest, []File) {
	desired := NewManifest(nil, nil)
	var pending []File
	for _, f := range files {
		if desired.Dependencies[f.Key] == nil {
			desired.Dependencies[f.Key] = map[Arch]File{}
		}
		if cur != nil {
			if old, ok := cur.Dependencies[f.Key][f.Arch]; ok && old.Path == f.Path && old.Digest == f.Digest &&
				old.Version == f.Version && old.URL == f.URL && (f.Size == 0 || f.Size == old.Size) {
				desired.Dependencies[f.Key][f.Arch] = old
				continue
			}
		}
		desired.Dependencies[f.Key][f.Arch] = withoutIdentity(f)
		pending = append(pending, f)
	}
	return desired, pending
}

// withoutIdentity drops the fields that the manifest keeps as map keys.
func withoutIdentity(f File) File {
	f.Key, f.Arch, f.Canonical = "", "", ""
	return f
}

// upload ensures pending files are in the cache and streams them to the
// bucket with bounded concurrency. Objects already uploaded with the same
// digest (an earlier interrupted run) are not sent again. Sizes are
// filled into pending in place.
func upload(ctx context.Context, store objstore.Store, opts PublishOptions, pending []File) (_ []string, err error) {
	if len(pending) == 0 {
		return nil, nil
	}
	if opts.Cache == nil {
		return nil, errors.New("publish dependencies: files are pending and no cache is configured")
	}
	ensured, err := opts.Cache.EnsureAll(ctx, pending)
	if err != nil {
		return nil, err
	}
	copy(pending, ensured)
	n := opts.Concurrency
	if n <= 0 {
		n = 4
	}
	var mu sync.Mutex
	var uploaded []string
	var total int64
	for _, f := range pending {
		total += f.Size
	}
	tr := progress.Or(opts.Transfers).Begin("upload node dependencies", total)
	defer func() { tr.End(err) }()
	err = forEach(ctx, n, len(pending), func(ctx context.Context, i int) error {
		f := pending[i]
		if info, err := store.Head(ctx, f.Path); err == nil && info.Size == f.Size && info.Metadata[DigestMetadata] == f.Digest {
			tr.Skip(f.Size)
			return nil
		}
		file, err := os.Open(opts.Cache.Path(f))
		if err != nil {
			return err
		}
		defer file.Close()
		po := objstore.PutOptions{}
		if _, ok := store.(objstore.Streamer); ok {
			po.Metadata = map[string]string{DigestMetadata: f.Digest}
		}
		it := tr.Item(path.Base(f.Path), f.Size)
		defer it.Done()
		if _, err := objstore.WriteObject(ctx, store, f.Path, countingFile{File: file, it: it}, f.Size, po); err != nil {
			return fmt.Errorf("upload %s: %w", f.Path, err)
		}
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf("uploaded %s (%d bytes)", f.Path, f.Size))
		}
		mu.Lock()
		uploaded = append(uploaded, f.Path)
		mu.Unlock()
		return nil
	})
	return uploaded, err
}

// forEach runs fn for 0..count-1 with at most n at once and returns the
// first error; the others are cancelled.
func forEach(ctx context.Context, n, count int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := 0; i < count; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// countingFile reports the bytes read from a file to a progress item and
// keeps the file's ReadAt and Seek, so streaming uploads still send
// sections in parallel.
type countingFile struct {
	*os.File
	it progress.Item
}

func (c countingFile) Read(p []byte) (int, error) {
	n, err := c.File.Read(p)
	c.it.Add(int64(n))
	return n, err
}

func (c countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.File.ReadAt(p, off)
	c.it.Add(int64(n))
	return n, err
}
