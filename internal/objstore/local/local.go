// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/paths"
)

var _ objstore.Bucket = (*Bucket)(nil)

// Bucket is a bucket stored in a directory. Its methods are safe for
// concurrent use, also by several processes sharing the directory.
type Bucket struct {
	dir     string
	records recordCache
}

// Open returns the bucket stored in dir. It does not touch the filesystem:
// use BucketExists and CreateBucket to check for or make the directory.
func Open(dir string) *Bucket {
	return &Bucket{dir: filepath.Clean(dir)}
}

// Dir returns the bucket's directory.
func (b *Bucket) Dir() string { return b.dir }

// Get returns the object's bytes, ETag and metadata. ErrNotModified
// reports that opts.IfNoneMatch equals the current ETag.
func (b *Bucket) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	if err := b.check(ctx, key); err != nil {
		return objstore.Object{}, fmt.Errorf("get %q: %w", key, err)
	}
	f, fi, v, err := b.openVersion(key)
	if err != nil {
		return objstore.Object{}, b.readError("get", key, err)
	}
	defer f.Close()
	if opts.IfNoneMatch != "" && objstore.SameETag(opts.IfNoneMatch, v.ETag) {
		return objstore.Object{}, fmt.Errorf("get %q: %w", key, objstore.ErrNotModified)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, fi.Size()), data); err != nil {
		return objstore.Object{}, fmt.Errorf("get %q: %w", key, err)
	}
	return objstore.Object{Data: data, ETag: v.ETag, Metadata: objstore.CloneMetadata(v.Metadata)}, nil
}

// Head returns the object's size, ETag and metadata from its record, in
// time independent of the object's size. A file changed behind the store's
// back is hashed once.
func (b *Bucket) Head(ctx context.Context, key string) (objstore.Info, error) {
	if err := b.check(ctx, key); err != nil {
		return objstore.Info{}, fmt.Errorf("head %q: %w", key, err)
	}
	f, fi, v, err := b.openVersion(key)
	if err != nil {
		return objstore.Info{}, b.readError("head", key, err)
	}
	f.Close()
	return info(key, fi, v), nil
}

// Open streams the object, or opts.Range of it, from its file. The reader
// keeps reading the version it opened even if the key is rewritten.
func (b *Bucket) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	if err := b.check(ctx, key); err != nil {
		return nil, fmt.Errorf("open %q: %w", key, err)
	}
	f, fi, v, err := b.openVersion(key)
	if err != nil {
		return nil, b.readError("open", key, err)
	}
	if opts.IfNoneMatch != "" && objstore.SameETag(opts.IfNoneMatch, v.ETag) {
		f.Close()
		return nil, fmt.Errorf("open %q: %w", key, objstore.ErrNotModified)
	}
	off, n, err := objstore.CheckRange(opts.Range, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %q: %w", key, err)
	}
	return &objstore.Reader{
		ReadCloser: fileSection{SectionReader: io.NewSectionReader(f, off, n), f: f},
		Info:       info(key, fi, v),
	}, nil
}

// OpenFile opens key's file for reading and describes the version it
// holds, whose ETag is the quoted hex SHA-256 of exactly the bytes of the
// returned file (see the package documentation). The caller closes the
// file; it keeps reading that version even if the key is rewritten.
func (b *Bucket) OpenFile(ctx context.Context, key string) (*os.File, objstore.Info, error) {
	if err := b.check(ctx, key); err != nil {
		return nil, objstore.Info{}, fmt.Errorf("open %q: %w", key, err)
	}
	f, fi, v, err := b.openVersion(key)
	if err != nil {
		return nil, objstore.Info{}, b.readError("open", key, err)
	}
	return f, info(key, fi, v), nil
}

// fileSection reads a section of an open file and closes the file.
type fileSection struct {
	*io.SectionReader
	f *os.File
}

func (s fileSection) Close() error { return s.f.Close() }

// PutIfAbsent writes data only when no object exists at key.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return b.write(ctx, "put-if-absent", key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfAbsent: true})
}

// PutIfMatch replaces the object only while its ETag equals etag. A missing
// object is reported as ErrNotFound, as S3 does.
func (b *Bucket) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if etag == "" {
		return "", fmt.Errorf("put-if-match %q: empty etag: read the object first", key)
	}
	return b.write(ctx, "put-if-match", key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfMatch: etag})
}

// Put writes data unconditionally.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) (string, error) {
	return b.write(ctx, "put", key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{})
}

// Write streams size bytes from body into a temporary file under
// .podmin/tmp, hashing them on the way, and then makes the file the object
// (with its metadata) under the key's lock. The body is read before the
// lock is taken, so a slow writer holds up no one. A body that is not
// exactly size bytes long writes nothing.
func (b *Bucket) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	return b.write(ctx, "write", key, body, size, opts)
}

// Delete removes the object, its record and then any parent directories it
// leaves empty. With ifMatch set, a missing object is ErrNotFound and a
// different ETag is ErrPrecondition.
func (b *Bucket) Delete(ctx context.Context, key string, ifMatch string) error {
	if err := b.check(ctx, key); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	unlock, err := b.lock(key)
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	defer unlock()
	// The identity of the file being deleted names its record.
	var id fileID
	exists := false
	if ifMatch != "" {
		cur, ok, err := b.current(key)
		if err != nil {
			return fmt.Errorf("delete %q: %w", key, err)
		}
		if err := matches("delete", key, ifMatch, cur.ETag, ok); err != nil {
			return err
		}
		id, exists = cur.ID, ok
	} else if fi, err := os.Lstat(b.path(key)); err == nil && fi.Mode().IsRegular() {
		id, exists = idOf(fi), true
	}
	p := b.path(key)
	switch err := syscall.Unlink(p); {
	case err == nil:
	case missing(err):
		return nil
	case isDir(p):
		// A directory holds other keys; there is no object at key.
		return nil
	default:
		return fmt.Errorf("delete %q: %w", key, &os.PathError{Op: "unlink", Path: p, Err: err})
	}
	if err := paths.SyncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	// A record left behind by a crash here describes no file.
	if exists {
		b.removeRecord(key, id)
	}
	b.removeEmptyParents(p)
	return nil
}

// smallWrite is the largest body write reads into memory before taking
// the key's lock.
const smallWrite = 64 << 10

// write runs one write: read or spool the body, then under the lock check
// the conditions of opts, write the record and rename the file into place.
func (b *Bucket) write(ctx context.Context, op, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	if err := b.check(ctx, key); err != nil {
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	if err := objstore.CheckPutOptions(opts); err != nil {
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	// A small body is read into memory and written to its file only once
	// the conditions hold, so a writer that lost a race touches no file.
	// A large one is spooled before the lock, so that a slow body holds
	// up no one.
	var (
		small  []byte
		tmp    string
		v      version
		finish func(sync bool) error
		err    error
	)
	if size <= smallWrite {
		// Once started, a small write completes even if ctx ends: it
		// takes no longer than the check would.
		if small, err = objstore.ReadExactly(body, size); err != nil {
			return "", fmt.Errorf("%s %q: %w", op, key, err)
		}
	} else if tmp, v, finish, err = b.spool(ctx, body, size); err != nil {
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	renamed := false
	defer func() {
		if tmp != "" && !renamed {
			_ = os.Remove(tmp)
		}
	}()
	unlock, err := b.lock(key)
	if err != nil {
		if finish != nil {
			_ = finish(false)
		}
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	defer unlock()
	// Conditions are checked before anything is synced, so a writer that
	// lost a race costs little.
	cur, exists, err := b.current(key)
	if err == nil {
		switch {
		case opts.IfAbsent && exists:
			err = fmt.Errorf("%s %q: the object already exists: %w", op, key, objstore.ErrPrecondition)
		case opts.IfMatch != "":
			err = matches(op, key, opts.IfMatch, cur.ETag, exists)
		}
	}
	if err != nil {
		if finish != nil {
			_ = finish(false)
		}
		if errors.Is(err, objstore.ErrPrecondition) || errors.Is(err, objstore.ErrNotFound) {
			return "", err
		}
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	if size <= smallWrite {
		if tmp, v, finish, err = b.spool(context.WithoutCancel(ctx), bytes.NewReader(small), size); err != nil {
			return "", fmt.Errorf("%s %q: %w", op, key, err)
		}
	}
	v.Metadata = objstore.CloneMetadata(opts.Metadata)
	// The object's data is synced while the record is written. A record
	// without metadata need not survive a crash: a lost one costs a
	// rehash that yields the same ETag.
	synced := make(chan error, 1)
	go func() { synced <- finish(true) }()
	err = b.writeRecord(key, v, len(v.Metadata) > 0)
	if serr := <-synced; serr != nil {
		if err == nil {
			b.removeRecord(key, v.ID)
		}
		return "", fmt.Errorf("%s %q: %w", op, key, serr)
	}
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	if err := b.replace(key, tmp); err != nil {
		b.removeRecord(key, v.ID)
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	renamed = true
	if exists && cur.ID != v.ID {
		// Readers still holding the old file look again under the lock.
		b.records.drop(key, cur.ID)
		_ = os.Remove(b.recordPath(key, cur.ID))
	}
	return v.ETag, nil
}

// current describes the object at key, or reports exists=false. The
// caller holds key's lock.
func (b *Bucket) current(key string) (v version, exists bool, err error) {
	f, _, v, err := b.openDescribed(key, hashAndRepair)
	switch {
	case err == nil:
		f.Close()
		return v, true, nil
	case missing(err) || errors.Is(err, errIsDir) || errors.Is(err, syscall.EISDIR):
		return version{}, false, nil
	default:
		return version{}, false, err
	}
}

// matches checks an If-Match condition against the current state.
func matches(op, key, want, cur string, exists bool) error {
	if !exists {
		return fmt.Errorf("%s %q: %w", op, key, objstore.ErrNotFound)
	}
	if !objstore.SameETag(want, cur) {
		return fmt.Errorf("%s %q: ETag is %s, not %s: re-read the object and retry: %w", op, key, cur, want, objstore.ErrPrecondition)
	}
	return nil
}

// check rejects cancelled contexts and keys the bucket cannot store.
func (b *Bucket) check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return validateKey(key)
}

// path maps a valid key to its file.
func (b *Bucket) path(key string) string {
	return filepath.Join(b.dir, filepath.FromSlash(key))
}

// readError turns a failed read of key into ErrNotFound when the object (or
// the whole bucket) is missing.
func (b *Bucket) readError(op, key string, err error) error {
	if missing(err) || errors.Is(err, syscall.EISDIR) || errors.Is(err, errIsDir) {
		if berr := b.requireBucket(); berr != nil {
			return fmt.Errorf("%s %q: %w", op, key, berr)
		}
		return fmt.Errorf("%s %q: %w", op, key, objstore.ErrNotFound)
	}
	return fmt.Errorf("%s %q: %w", op, key, err)
}

// errIsDir reports that a key names a directory, that is a prefix of other
// keys, and so no object.
var errIsDir = errors.New("is a directory")

// missing reports errors that mean "no file at this path".
func missing(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func quote(sum []byte) string {
	return `"` + hex.EncodeToString(sum) + `"`
}
