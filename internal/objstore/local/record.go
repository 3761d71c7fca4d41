// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"podmin.dev/podmin/internal/objstore"
)

// Every object has a record under .podmin/objects, named by the SHA-256 of
// its key, that holds what would otherwise cost a pass over the content:
// the ETag and the user metadata. A record describes one file version by
// its identity (inode, size, modification time); HEAD and GET trust it only
// while the file still has that identity, so a file replaced or edited
// behind the store's back is hashed again.
//
// The record and the object are two files, renamed one after the other
// under the key's lock. The record is renamed first and keeps the version
// it replaces as Prev, so a reader (or a crash) between the two renames
// still finds the object file it has open described by the record.

// fileID identifies one version of an object file.
type fileID struct {
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime_ns"`
}

// version is what the store knows about one object file version.
type version struct {
	ID       fileID            `json:"file"`
	ETag     string            `json:"etag"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// record is the content of an object's record file.
type record struct {
	Key  string   `json:"key"`
	Cur  version  `json:"current"`
	Prev *version `json:"previous,omitempty"`
}

// idOf returns the identity of the file fi describes.
func idOf(fi os.FileInfo) fileID {
	id := fileID{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Ino = st.Ino
	}
	return id
}

// recordPath is the record file of key.
func (b *Bucket) recordPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return b.metaPath("objects", h[:2], h+".json")
}

// readRecord returns key's record; ok is false when there is none (or it
// is unreadable, which costs a rehash, not an error).
func (b *Bucket) readRecord(key string) (rec record, ok bool) {
	data, err := os.ReadFile(b.recordPath(key))
	if err != nil {
		return record{}, false
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.Key != key {
		return record{}, false
	}
	return rec, true
}

// lookup returns the version of rec that describes the file with id.
func (rec record) lookup(id fileID) (version, bool) {
	if rec.Cur.ID == id {
		return rec.Cur, true
	}
	if rec.Prev != nil && rec.Prev.ID == id {
		return *rec.Prev, true
	}
	return version{}, false
}

// writeRecord durably replaces key's record. The caller holds key's lock.
func (b *Bucket) writeRecord(key string, rec record) error {
	rec.Key = key
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp, err := b.writeTemp(data)
	if err != nil {
		return err
	}
	target := b.recordPath(key)
	err = os.Rename(tmp, target)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(target), 0o700); err == nil {
			err = os.Rename(tmp, target)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write object record: %w", err)
	}
	return syncDir(filepath.Dir(target))
}

// removeRecord deletes key's record. The caller holds key's lock.
func (b *Bucket) removeRecord(key string) error {
	p := b.recordPath(key)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// errStale reports a file that its record does not describe: it must be
// looked at again under the key's lock.
var errStale = errors.New("object record is stale")

// describeMode says what describe does with a file its record does not
// describe.
type describeMode int

const (
	// trustRecord reports errStale.
	trustRecord describeMode = iota
	// hashFile hashes the file; used without the lock, which a reader
	// that may not write the bucket cannot take.
	hashFile
	// hashAndRepair hashes the file and rewrites the record; the caller
	// holds the key's lock.
	hashAndRepair
)

// describe returns the version of the open file f (whose stat is fi) at
// key. A file the record does not describe is errStale or hashed,
// depending on mode; repairing the record means only the first read after
// an outside change pays for the hash.
func (b *Bucket) describe(key string, f *os.File, fi os.FileInfo, mode describeMode) (version, error) {
	id := idOf(fi)
	rec, ok := b.readRecord(key)
	if ok {
		if v, ok := rec.lookup(id); ok {
			return v, nil
		}
	} else if err := b.requireBucket(); err != nil {
		return version{}, err
	}
	if mode == trustRecord {
		return version{}, errStale
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, fi.Size()), make([]byte, min(fi.Size()+1, 64<<10)))
	if err != nil {
		return version{}, err
	}
	if n != fi.Size() {
		return version{}, fmt.Errorf("file changed size while hashing: %w", errStale)
	}
	v := version{ID: id, ETag: quote(h.Sum(nil))}
	if mode == hashAndRepair {
		// A failed repair only means the next read hashes again.
		_ = b.writeRecord(key, record{Cur: v})
	}
	return v, nil
}

// openVersion opens key's file and describes the version it holds. The
// caller closes the file.
func (b *Bucket) openVersion(key string) (*os.File, os.FileInfo, version, error) {
	f, fi, v, err := b.openDescribed(key, trustRecord)
	if !errors.Is(err, errStale) {
		return f, fi, v, err
	}
	unlock, err := b.lock(key)
	if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
		// A reader without write access hashes and leaves the record.
		return b.openDescribed(key, hashFile)
	}
	if err != nil {
		return nil, nil, version{}, err
	}
	defer unlock()
	return b.openDescribed(key, hashAndRepair)
}

func (b *Bucket) openDescribed(key string, mode describeMode) (*os.File, os.FileInfo, version, error) {
	f, err := os.Open(b.path(key))
	if err != nil {
		return nil, nil, version{}, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errIsDir
	}
	var v version
	if err == nil {
		v, err = b.describe(key, f, fi, mode)
	}
	if err != nil {
		f.Close()
		return nil, nil, version{}, err
	}
	return f, fi, v, nil
}

// info builds the objstore.Info of a described version.
func info(key string, fi os.FileInfo, v version) objstore.Info {
	return objstore.Info{
		Key:          key,
		ETag:         v.ETag,
		Size:         fi.Size(),
		LastModified: fi.ModTime(),
		Metadata:     objstore.CloneMetadata(v.Metadata),
	}
}
