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

	"podmin.dev/podmin/internal/objstore"
)

var _ objstore.Bucket = (*Bucket)(nil)

// Bucket is a bucket stored in a directory. Its methods are safe for
// concurrent use, also by several processes sharing the directory.
type Bucket struct {
	dir string
}

// Open returns the bucket stored in dir. It does not touch the filesystem:
// use BucketExists and CreateBucket to check for or make the directory.
func Open(dir string) *Bucket {
	return &Bucket{dir: filepath.Clean(dir)}
}

// Dir returns the bucket's directory.
func (b *Bucket) Dir() string { return b.dir }

// Get returns the object's bytes and ETag. ErrNotModified reports that
// opts.IfNoneMatch equals the current ETag.
func (b *Bucket) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	if err := b.check(ctx, key); err != nil {
		return objstore.Object{}, fmt.Errorf("get %q: %w", key, err)
	}
	data, err := os.ReadFile(b.path(key))
	if err != nil {
		return objstore.Object{}, b.readError("get", key, err)
	}
	etag := etagOf(data)
	if opts.IfNoneMatch != "" && sameETag(opts.IfNoneMatch, etag) {
		return objstore.Object{}, fmt.Errorf("get %q: %w", key, objstore.ErrNotModified)
	}
	return objstore.Object{Data: data, ETag: etag}, nil
}

// Head returns the object's metadata. The ETag is computed by hashing the
// file, which keeps it correct whoever wrote the file.
func (b *Bucket) Head(ctx context.Context, key string) (objstore.Info, error) {
	if err := b.check(ctx, key); err != nil {
		return objstore.Info{}, fmt.Errorf("head %q: %w", key, err)
	}
	info, err := b.stat(key)
	if err != nil {
		return objstore.Info{}, b.readError("head", key, err)
	}
	return info, nil
}

// PutIfAbsent writes data only when no object exists at key.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return b.write(ctx, "put-if-absent", key, data, func(cur string, exists bool) error {
		if exists {
			return fmt.Errorf("put-if-absent %q: the object already exists: %w", key, objstore.ErrPrecondition)
		}
		return nil
	})
}

// PutIfMatch replaces the object only while its ETag equals etag. A missing
// object is reported as ErrNotFound, as S3 does.
func (b *Bucket) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return b.write(ctx, "put-if-match", key, data, func(cur string, exists bool) error {
		return matches("put-if-match", key, etag, cur, exists)
	})
}

// Put writes data unconditionally.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) (string, error) {
	return b.write(ctx, "put", key, data, nil)
}

// Delete removes the object and then any parent directories it leaves
// empty. With ifMatch set, a missing object is ErrNotFound and a different
// ETag is ErrPrecondition.
func (b *Bucket) Delete(ctx context.Context, key string, ifMatch string) error {
	if err := b.check(ctx, key); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	unlock, err := b.lock(key)
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	defer unlock()
	if ifMatch != "" {
		cur, exists, err := b.currentETag(key)
		if err != nil {
			return fmt.Errorf("delete %q: %w", key, err)
		}
		if err := matches("delete", key, ifMatch, cur, exists); err != nil {
			return err
		}
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
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	b.removeEmptyParents(p)
	return nil
}

// write runs one locked write. cond, when set, sees the current ETag and
// vetoes the write by returning an error.
func (b *Bucket) write(ctx context.Context, op, key string, data []byte, cond func(cur string, exists bool) error) (string, error) {
	if err := b.check(ctx, key); err != nil {
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	unlock, err := b.lock(key)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	defer unlock()
	if cond != nil {
		cur, exists, err := b.currentETag(key)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", op, key, err)
		}
		if err := cond(cur, exists); err != nil {
			return "", err
		}
	}
	if err := b.replace(key, data); err != nil {
		return "", fmt.Errorf("%s %q: %w", op, key, err)
	}
	return etagOf(data), nil
}

// matches checks an If-Match condition against the current state.
func matches(op, key, want, cur string, exists bool) error {
	if !exists {
		return fmt.Errorf("%s %q: %w", op, key, objstore.ErrNotFound)
	}
	if !sameETag(want, cur) {
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

// stat opens key's file once so the size, ETag and time describe one version.
func (b *Bucket) stat(key string) (objstore.Info, error) {
	f, err := os.Open(b.path(key))
	if err != nil {
		return objstore.Info{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return objstore.Info{}, err
	}
	if !fi.Mode().IsRegular() {
		return objstore.Info{}, errIsDir
	}
	h := sha256.New()
	// A buffer the size of the file: small objects are the common case and
	// io.Copy would allocate 32 KiB for each.
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, min(fi.Size()+1, 32<<10)))
	if err != nil {
		return objstore.Info{}, err
	}
	return objstore.Info{
		Key:          key,
		ETag:         quote(h.Sum(nil)),
		Size:         n,
		LastModified: fi.ModTime(),
	}, nil
}

// currentETag returns the ETag of the object at key, or exists=false.
func (b *Bucket) currentETag(key string) (etag string, exists bool, err error) {
	info, err := b.stat(key)
	switch {
	case err == nil:
		return info.ETag, true, nil
	case missing(err) || errors.Is(err, errIsDir):
		return "", false, nil
	default:
		return "", false, err
	}
}

// missing reports errors that mean "no file at this path".
func missing(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// etagOf is the ETag of content: its quoted SHA-256.
func etagOf(data []byte) string {
	sum := sha256.Sum256(data)
	return quote(sum[:])
}

func quote(sum []byte) string {
	return `"` + hex.EncodeToString(sum) + `"`
}

// sameETag compares ETags the way S3 does, ignoring the surrounding quotes.
func sameETag(a, b string) bool {
	return strings.Trim(a, `"`) == strings.Trim(b, `"`)
}
