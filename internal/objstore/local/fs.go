// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/paths"
)

// lockStripes bounds the number of lock files: keys hash onto 4096 of them,
// so unrelated keys rarely wait for each other and the folder never grows.
const lockStripes = 3 // hex digits of the key hash

// maxAttempts bounds the retries of a write that races with a delete
// removing the (then empty) parent directory it is writing into.
const maxAttempts = 64

func (b *Bucket) metaPath(elem ...string) string {
	return filepath.Join(append([]string{b.dir, metaDir}, elem...)...)
}

// lock takes the exclusive cross-process lock for key. The returned func
// releases it. flock locks belong to the open file description, so
// goroutines of one process exclude each other as well as other processes.
func (b *Bucket) lock(key string) (func(), error) {
	sum := sha256.Sum256([]byte(key))
	name := b.metaPath("locks", hex.EncodeToString(sum[:2])[:lockStripes])
	fd, err := syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, syscall.ENOENT) {
		if err := b.ensureMeta(); err != nil {
			return nil, err
		}
		fd, err = syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", &os.PathError{Op: "open", Path: name, Err: err})
	}
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("lock: %w", &os.PathError{Op: "flock", Path: name, Err: err})
	}
	// Closing the descriptor releases the lock.
	return func() { _ = syscall.Close(fd) }, nil
}

// requireBucket returns an ErrBucketNotFound error when the bucket
// directory or its .podmin folder is missing, so that callers can tell a
// missing bucket from a missing key. A directory without .podmin was never
// made a bucket (or is not the directory the operator meant): CreateBucket
// adopts it.
func (b *Bucket) requireBucket() error {
	fi, err := os.Stat(b.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("local bucket directory %q does not exist (%w): check the bucket name, or create the bucket first", b.dir, objstore.ErrBucketNotFound)
	case err != nil:
		return fmt.Errorf("local bucket: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("local bucket %q is not a directory: remove the file or choose another bucket directory", b.dir)
	}
	fi, err = os.Stat(b.metaPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("local bucket directory %q has no %s folder, so it is not a bucket (%w): check the bucket name, or create the bucket to adopt the directory", b.dir, metaDir, objstore.ErrBucketNotFound)
	case err != nil:
		return fmt.Errorf("local bucket: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("local bucket %q: %s is not a directory: remove it and create the bucket again", b.dir, b.metaPath())
	}
	return nil
}

// metaDirs are the folders inside .podmin.
var metaDirs = []string{"locks", "tmp", "objects"}

// ensureMeta creates the folders inside .podmin of an existing bucket; a
// bucket made by an older version lacks some of them. It never creates
// .podmin itself: only CreateBucket makes a directory a bucket.
func (b *Bucket) ensureMeta() error {
	if err := b.requireBucket(); err != nil {
		return err
	}
	for _, d := range metaDirs {
		if err := os.MkdirAll(b.metaPath(d), 0o700); err != nil {
			return fmt.Errorf("create local bucket metadata: %w", err)
		}
	}
	return nil
}

// writeTemp writes data to a new synced file in .podmin/tmp (see
// createTemp).
func (b *Bucket) writeTemp(data []byte) (string, error) {
	return b.writeTempFile(data, true)
}

// writeTempNoSync is writeTemp without the fsync, for files whose loss in
// a crash costs nothing.
func (b *Bucket) writeTempNoSync(data []byte) (string, error) {
	return b.writeTempFile(data, false)
}

func (b *Bucket) writeTempFile(data []byte, sync bool) (string, error) {
	f, err := b.createTemp()
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// createTemp creates a new file in .podmin/tmp. Temporary files live
// there, not beside the target, so that a crash never leaves debris in the
// operator's view or in listings; .podmin is on the same filesystem as the
// objects, so rename stays atomic.
func (b *Bucket) createTemp() (*os.File, error) {
	f, err := os.CreateTemp(b.metaPath("tmp"), "put-*")
	if errors.Is(err, os.ErrNotExist) {
		if err := b.ensureMeta(); err != nil {
			return nil, err
		}
		f, err = os.CreateTemp(b.metaPath("tmp"), "put-*")
	}
	return f, err
}

// spool copies exactly size bytes of body into a temporary file, computing
// the SHA-256 ETag on the way, and returns the file's name and version,
// and finish, which (syncs and) closes the file; the caller runs it once,
// syncing only a file it will rename into place. A body of another length is ErrSizeMismatch.
func (b *Bucket) spool(ctx context.Context, body io.Reader, size int64) (string, version, func(sync bool) error, error) {
	if size < 0 {
		return "", version{}, nil, fmt.Errorf("negative size %d: %w", size, objstore.ErrSizeMismatch)
	}
	f, err := b.createTemp()
	if err != nil {
		return "", version{}, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	n, err := copyHashing(f, h, ctxReader{ctx, io.LimitReader(body, size)}, size)
	if err != nil {
		return "", version{}, nil, err
	}
	if n < size {
		return "", version{}, nil, fmt.Errorf("body ended after %d of %d bytes: %w", n, size, objstore.ErrSizeMismatch)
	}
	if err := objstore.ExpectEOF(body, size); err != nil {
		return "", version{}, nil, err
	}
	// Stamp the file with a modification time no later write can get, so
	// that an edit behind the store's back changes the identity the record
	// is trusted by even within one tick of the file system's clock.
	stamp := time.Now().Add(-stampLag)
	if err := os.Chtimes(f.Name(), stamp, stamp); err != nil {
		return "", version{}, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return "", version{}, nil, err
	}
	ok = true
	finish := func(sync bool) error {
		var err error
		if sync {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return f.Name(), version{ID: idOf(fi), ETag: quote(h.Sum(nil))}, finish, nil
}

// hashChunk is the unit in which copyHashing overlaps hashing with
// writing; small objects are copied in one go without a goroutine.
const hashChunk = 1 << 20

// copyHashing copies src (at most size bytes) to f and into h. For large
// objects it hashes each chunk in a goroutine while the chunk is written
// and the next one read, so a write costs about the slower of hashing and
// writing rather than their sum.
func copyHashing(f io.Writer, h io.Writer, src io.Reader, size int64) (int64, error) {
	if size <= hashChunk {
		buf := make([]byte, size+1) // +1 lets ReadFull see the end
		n, err := io.ReadFull(src, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read body: %w", err)
		}
		h.Write(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			return 0, err
		}
		return int64(n), nil
	}
	bufs := [2][]byte{make([]byte, hashChunk), make([]byte, hashChunk)}
	var total int64
	var hashed chan struct{}
	wait := func() {
		if hashed != nil {
			<-hashed
			hashed = nil
		}
	}
	defer wait()
	for i := 0; ; i ^= 1 {
		n, rerr := io.ReadFull(src, bufs[i])
		if n > 0 {
			// The previous chunk's hash must be done before the next
			// starts: hashes are sequential, writes overlap them.
			wait()
			chunk := bufs[i][:n]
			done := make(chan struct{})
			hashed = done
			go func() {
				h.Write(chunk)
				close(done)
			}()
			if _, err := f.Write(chunk); err != nil {
				return total, err
			}
			total += int64(n)
		}
		switch {
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			return total, nil
		case rerr != nil:
			return total, fmt.Errorf("read body: %w", rerr)
		}
	}
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// replace atomically makes the synced file tmp the content of key: rename,
// then fsync of the directory. The caller holds key's lock and removes tmp
// when replace fails.
func (b *Bucket) replace(key, tmp string) error {
	target := b.path(key)
	for range maxAttempts {
		if err := b.mkdirs(key); err != nil {
			return err
		}
		err := syscall.Rename(tmp, target)
		switch {
		case err == nil:
			return paths.SyncDir(filepath.Dir(target))
		case errors.Is(err, syscall.ENOENT):
			// A delete removed the empty parent directory; make it again.
			continue
		case errors.Is(err, syscall.ENOTDIR):
			return b.conflict(key)
		case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENOTEMPTY):
			// A directory is in the way. An empty one is debris of a
			// delete that lost a race, and can go.
			if syscall.Rmdir(target) == nil {
				continue
			}
			return b.conflict(key)
		default:
			return &os.PathError{Op: "rename", Path: target, Err: err}
		}
	}
	return fmt.Errorf("parent directory of %q kept disappearing after %d attempts: retry", key, maxAttempts)
}

// mkdirs creates the parent directories of key, syncing each new entry.
func (b *Bucket) mkdirs(key string) error {
	if isDir(filepath.Dir(b.path(key))) {
		return nil
	}
	segs := strings.Split(key, "/")
	parent := b.dir
	for _, seg := range segs[:len(segs)-1] {
		dir := filepath.Join(parent, seg)
		switch err := syscall.Mkdir(dir, 0o700); {
		case err == nil:
			if err := paths.SyncDir(parent); err != nil {
				return err
			}
		case errors.Is(err, syscall.EEXIST):
			if !isDir(dir) {
				return b.conflict(key)
			}
		case errors.Is(err, syscall.ENOTDIR):
			return b.conflict(key)
		case errors.Is(err, syscall.ENOENT) && parent != b.dir:
			// A concurrent delete removed parent; replace retries.
			return nil
		default:
			if berr := b.requireBucket(); berr != nil {
				return berr
			}
			return &os.PathError{Op: "mkdir", Path: dir, Err: err}
		}
		parent = dir
	}
	return nil
}

// conflict explains why key cannot be a file: either one of its parents is
// an object, or key itself is the parent of other objects.
func (b *Bucket) conflict(key string) error {
	segs := strings.Split(key, "/")
	for i := 1; i < len(segs); i++ {
		parent := strings.Join(segs[:i], "/")
		if fi, err := os.Lstat(b.path(parent)); err == nil && !fi.IsDir() {
			return fmt.Errorf("%w: %q is an object, so %q cannot be stored under it: a local bucket cannot hold a key and keys below it", ErrInvalidKey, parent, key)
		}
	}
	return fmt.Errorf("%w: %q is a prefix of other keys (%s/...): a local bucket cannot hold a key and keys below it", ErrInvalidKey, key, key)
}

// removeEmptyParents removes the directories above p that are now empty,
// stopping at the bucket directory. Failure only leaves an empty directory,
// which later writes reuse or remove.
func (b *Bucket) removeEmptyParents(p string) {
	for dir := filepath.Dir(p); dir != b.dir && strings.HasPrefix(dir, b.dir+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if syscall.Rmdir(dir) != nil {
			return
		}
		_ = paths.SyncDir(filepath.Dir(dir))
	}
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}
