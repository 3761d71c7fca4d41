// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package cache

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultMaxBytes bounds a cache opened with a non-positive bound. Pod and
// Service payloads are a few KiB, so this holds many thousands of them.
const DefaultMaxBytes = 64 << 20

// digestLen is the length of a hex SHA-512 digest.
const digestLen = 128

// ErrDigestMismatch reports bytes that do not hash to the digest they were
// offered under.
var ErrDigestMismatch = errors.New("bytes do not match their SHA-512 digest")

// Cache is a directory of objects named by their SHA-512. It is safe for
// concurrent use, also by several processes sharing the directory.
type Cache struct {
	dir      string
	maxBytes int64
	now      func() time.Time

	mu sync.Mutex
	// added counts bytes written since the last size check; checked is
	// whether this process has measured the directory at all.
	added   int64
	checked bool
}

// Option configures Open.
type Option func(*Cache)

// WithClock replaces time.Now, for tests of eviction order.
func WithClock(now func() time.Time) Option { return func(c *Cache) { c.now = now } }

// Open returns the cache rooted at dir, bounded to maxBytes (DefaultMaxBytes
// when not positive). The directory is created on the first write.
func Open(dir string, maxBytes int64, opts ...Option) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	c := &Cache{dir: dir, maxBytes: maxBytes, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Dir is the cache's root directory.
func (c *Cache) Dir() string { return c.dir }

func validDigest(d string) bool {
	if len(d) != digestLen {
		return false
	}
	for i := 0; i < len(d); i++ {
		if !(d[i] >= '0' && d[i] <= '9' || d[i] >= 'a' && d[i] <= 'f') {
			return false
		}
	}
	return true
}

// path is <dir>/sha512/<first two>/<digest>: a fan-out keeps directories small.
func (c *Cache) path(digest string) string {
	return filepath.Join(c.dir, "sha512", digest[:2], digest)
}

// Sum is the lowercase hex SHA-512 of data, the name Get and Put use.
func Sum(data []byte) string {
	s := sha512.Sum512(data)
	return hex.EncodeToString(s[:])
}

// Get returns the object named digest. A missing, unreadable or corrupt
// file is a miss; a corrupt one is also removed so the next Put replaces it.
func (c *Cache) Get(digest string) ([]byte, bool) {
	if !validDigest(digest) {
		return nil, false
	}
	p := c.path(digest)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	if Sum(data) != digest {
		_ = os.Remove(p)
		return nil, false
	}
	// Mark it used for eviction; a failure only makes it older.
	now := c.now()
	_ = os.Chtimes(p, now, now)
	return data, true
}

// Put stores data under digest after checking that it hashes to it. An
// existing entry is left alone (it holds the same bytes by construction).
func (c *Cache) Put(digest string, data []byte) error {
	if !validDigest(digest) {
		return fmt.Errorf("cache: invalid SHA-512 digest %q", digest)
	}
	if got := Sum(data); got != digest {
		return fmt.Errorf("cache: %w: got %s…, want %s…", ErrDigestMismatch, got[:16], digest[:16])
	}
	p := c.path(digest)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	// Another process may rename the same bytes into place first; the
	// rename then replaces equal content, which is harmless.
	if err := writeAtomic(p, data); err != nil {
		return err
	}
	c.noteAdded(int64(len(data)))
	return nil
}

// writeAtomic writes data to p by renaming a complete temporary file in
// the same directory over it, so a reader sees the old file or the new one.
func writeAtomic(p string, data []byte) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("cache: %w", werr)
	}
	return nil
}

// maxNoteLen bounds a note's value: notes are small facts, not objects.
const maxNoteLen = 4 << 10

// notePath is <dir>/notes/<first two>/<digest>/<SHA-256 of name>: a
// note's name may be any string, and the notes of one object share a
// directory so they can be dropped with it.
func (c *Cache) notePath(digest, name string) string {
	h := sha256.Sum256([]byte(name))
	return filepath.Join(c.dir, "notes", digest[:2], digest, hex.EncodeToString(h[:]))
}

// SetNote attaches a small value to the object named digest under name,
// replacing an earlier value of that name. The cache does not interpret
// notes; its callers record facts about the object in them (such as where
// its bytes were verified). The object itself need not be cached. Notes
// of an object that is evicted are removed with it by Prune.
func (c *Cache) SetNote(digest, name, value string) error {
	if !validDigest(digest) {
		return fmt.Errorf("cache: invalid SHA-512 digest %q", digest)
	}
	if len(value) > maxNoteLen {
		return fmt.Errorf("cache: note of %d bytes is longer than %d", len(value), maxNoteLen)
	}
	return writeAtomic(c.notePath(digest, name), []byte(value))
}

// Note returns the value SetNote stored for the object named digest under
// name. A missing or unreadable note is a miss.
func (c *Cache) Note(digest, name string) (string, bool) {
	if !validDigest(digest) {
		return "", false
	}
	data, err := os.ReadFile(c.notePath(digest, name))
	if err != nil || len(data) > maxNoteLen {
		return "", false
	}
	return string(data), true
}

// noteAdded triggers a size check on the first write of this process and
// after every tenth of the bound written since, so a burst of writes does
// not walk the directory once per file.
func (c *Cache) noteAdded(n int64) {
	c.mu.Lock()
	c.added += n
	due := !c.checked || c.added >= c.maxBytes/10
	if due {
		c.checked, c.added = true, 0
	}
	c.mu.Unlock()
	if due {
		_ = c.Prune()
	}
}

// Prune removes the least recently used objects while the cache is larger
// than its bound, down to three quarters of it. Temporary files older than
// an hour (left by a crashed writer) are removed too.
func (c *Cache) Prune() error {
	type file struct {
		path string
		size int64
		used time.Time
	}
	var files []file
	var total int64
	root := filepath.Join(c.dir, "sha512")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // evicted or never created
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			if c.now().Sub(info.ModTime()) > time.Hour {
				_ = os.Remove(p)
			}
			return nil
		}
		files = append(files, file{p, info.Size(), info.ModTime()})
		total += info.Size()
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache: prune %s: %w", c.dir, err)
	}
	if total > c.maxBytes {
		slices.SortFunc(files, func(a, b file) int { return a.used.Compare(b.used) })
		for _, f := range files {
			if total <= c.maxBytes*3/4 {
				break
			}
			if err := os.Remove(f.path); err == nil || errors.Is(err, fs.ErrNotExist) {
				total -= f.size
			}
		}
	}
	return c.pruneNotes()
}

// pruneNotes removes the notes of objects that are no longer cached, so
// notes never outgrow the objects they describe. A note written for an
// object that is stored only afterwards may be dropped here: a note is a
// hint its caller can always recompute.
func (c *Cache) pruneNotes() error {
	root := filepath.Join(c.dir, "notes")
	fans, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("cache: prune notes: %w", err)
	}
	for _, fan := range fans {
		objs, err := os.ReadDir(filepath.Join(root, fan.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		for _, o := range objs {
			if !validDigest(o.Name()) {
				continue
			}
			if _, err := os.Stat(c.path(o.Name())); errors.Is(err, fs.ErrNotExist) {
				_ = os.RemoveAll(filepath.Join(root, fan.Name(), o.Name()))
			}
		}
	}
	return nil
}
