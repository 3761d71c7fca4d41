// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/progress"
)

// CacheDir returns the dependency cache beneath the Podmin cache
// directory.
func CacheDir(podminCache string) string { return filepath.Join(podminCache, "dependencies") }

// Cache keeps verified dependency files at <Dir>/<key>/<object>.
type Cache struct {
	// Dir is the cache root, normally CacheDir(<podmin cache>).
	Dir string
	// Client downloads; nil is http.DefaultClient.
	Client *http.Client
	// Concurrency bounds parallel downloads; zero is 4.
	Concurrency int
	// Progress receives one line per file; nil discards.
	Progress func(msg string)
	// Transfers shows the downloads' bytes (bars on a terminal); nil
	// shows nothing.
	Transfers progress.Sink
}

// Path returns where f lives in the cache.
func (c *Cache) Path(f File) string {
	return filepath.Join(c.Dir, f.Key, path.Base(f.Path))
}

// Check reports whether the cached copy of f exists and matches its
// digest (and size when known), and returns its size.
func (c *Cache) Check(f File) (int64, bool) {
	file, err := os.Open(c.Path(f))
	if err != nil {
		return 0, false
	}
	defer file.Close()
	h, err := newHash(f.Digest)
	if err != nil {
		return 0, false
	}
	n, err := io.Copy(h, file)
	if err != nil || (f.Size > 0 && n != f.Size) {
		return 0, false
	}
	return n, f.Digest == digestOf(f.Digest, h)
}

// Ensure returns f with its exact size, reusing a valid cached copy or
// downloading it. A download whose bytes do not match the digest is
// refused with ErrDigestMismatch and leaves nothing behind.
func (c *Cache) Ensure(ctx context.Context, f File) (File, error) {
	var tr progress.Transfer
	out, err := c.ensure(ctx, f, func() progress.Transfer {
		tr = progress.Or(c.Transfers).Begin("download "+path.Base(f.Path), f.Size)
		return tr
	})
	if tr != nil {
		tr.End(err)
	}
	return out, err
}

// ensure is Ensure reporting a download's bytes to the transfer begin
// returns (only when a download is needed).
func (c *Cache) ensure(ctx context.Context, f File, begin func() progress.Transfer) (File, error) {
	if n, ok := c.Check(f); ok {
		f.Size = n
		return f, nil
	}
	n, err := c.download(ctx, f, begin())
	if err != nil {
		return File{}, err
	}
	f.Size = n
	c.progress("downloaded %s (%d bytes)", f.Path, n)
	return f, nil
}

// EnsureAll runs Ensure on every file with bounded concurrency and
// returns the files with sizes, in the input order.
func (c *Cache) EnsureAll(ctx context.Context, files []File) ([]File, error) {
	n := c.Concurrency
	if n <= 0 {
		n = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]File, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, n)
	// One transfer for every download, begun by the first one needed.
	var once sync.Once
	var tr progress.Transfer
	begin := func() progress.Transfer {
		once.Do(func() { tr = progress.Or(c.Transfers).Begin("download node dependencies", 0) })
		return tr
	}
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			out[i], errs[i] = c.ensure(ctx, f, begin)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	if tr != nil {
		tr.End(errors.Join(errs...))
	}
	// Report the first real failure, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return out, nil
}

// download streams f.URL into a temporary file beside its cache path,
// hashing as it goes, and renames it into place only when the digest
// matches.
func (c *Cache) download(ctx context.Context, f File, tr progress.Transfer) (n int64, err error) {
	h, err := newHash(f.Digest)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", f.Path, err)
	}
	dst := c.Path(f)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := withFiles(c.Client).Do(req)
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", f.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("download %s: %s", f.URL, resp.Status)
	}
	tmp, err := paths.CreateTemp(filepath.Dir(dst))
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	it := tr.Item(path.Base(f.Path), f.Size)
	n, err = io.Copy(io.MultiWriter(tmp, h), progress.Reader(it, resp.Body))
	it.Done()
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", f.URL, err)
	}
	if got := digestOf(f.Digest, h); got != f.Digest {
		return 0, fmt.Errorf("download %s: got %s, the publisher says %s: %w", f.URL, got, f.Digest, ErrDigestMismatch)
	}
	if f.Size > 0 && n != f.Size {
		return 0, fmt.Errorf("download %s: %d bytes, the publisher says %d: %w", f.URL, n, f.Size, ErrDigestMismatch)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return 0, err
	}
	if err = tmp.Sync(); err != nil {
		return 0, err
	}
	if err = tmp.Close(); err != nil {
		return 0, err
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return 0, err
	}
	return n, paths.SyncDir(filepath.Dir(dst))
}

func (c *Cache) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

// newHash returns the hash of digest's algorithm.
func newHash(digest string) (hash.Hash, error) {
	alg, _, _ := strings.Cut(digest, ":")
	switch alg {
	case "sha512":
		return sha512.New(), nil
	case "sha256":
		return sha256.New(), nil
	}
	return nil, fmt.Errorf("unsupported digest %q", digest)
}

// digestOf formats h's sum with digest's algorithm.
func digestOf(digest string, h hash.Hash) string {
	alg, _, _ := strings.Cut(digest, ":")
	return alg + ":" + hex.EncodeToString(h.Sum(nil))
}
