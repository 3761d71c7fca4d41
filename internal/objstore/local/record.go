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
	"strings"
	"sync"
	"syscall"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/paths"
)

// Every object version has a record under .podmin/objects that holds what
// would otherwise cost a pass over the content: the ETag and the user
// metadata. A record is named by the identity of the file version it
// describes (inode, size, modification time) inside a folder named by the
// SHA-256 of the key, so HEAD and GET find it in one lookup and trust it
// only while the file keeps that identity: a file replaced or edited
// behind the store's back has no record and is hashed again.
//
// A write makes its record durable before it takes the key's lock, so
// under the lock only the rename of the object itself is synced; the
// previous version's record is removed after the rename. A reader whose
// file was replaced meanwhile finds no record and looks again under the
// lock, where it sees the current version.

// stampLag is how far before the end of a write the store sets the
// modification time of the file it wrote. File systems take timestamps
// from a clock that advances in ticks (up to 10 ms, or 1 s on some file
// systems), so an edit in place within the same tick as the write would
// otherwise keep the file's identity and its record would describe bytes
// it was not made from. A time stamped this far back is one no later
// write can get. For the same reason a file found without a record is
// recorded only once it is older than stampLag.
const stampLag = 2 * time.Second

// fileID identifies one version of an object file.
type fileID struct {
	Ino   uint64
	Size  int64
	Mtime int64
}

// version is what the store knows about one object file version.
type version struct {
	ID       fileID            `json:"-"`
	ETag     string            `json:"etag"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// record is the content of a record file.
type record struct {
	Key string `json:"key"`
	version
}

// idOf returns the identity of the file fi describes.
func idOf(fi os.FileInfo) fileID {
	id := fileID{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Ino = st.Ino
	}
	return id
}

// recordDir is the folder of key's records.
func (b *Bucket) recordDir(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return b.metaPath("objects", h[:2], h)
}

// recordPath is the record of the version id of key.
func (b *Bucket) recordPath(key string, id fileID) string {
	return filepath.Join(b.recordDir(key), fmt.Sprintf("%d-%d-%d", id.Ino, id.Size, id.Mtime))
}

// readRecord returns the record of version id of key; ok is false when
// there is none (or it is unreadable, which costs a rehash, not an error).
func (b *Bucket) readRecord(key string, id fileID) (v version, ok bool) {
	if v, ok := b.records.get(key, id); ok {
		return v, true
	}
	data, err := os.ReadFile(b.recordPath(key, id))
	if err != nil {
		return version{}, false
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil || rec.Key != key {
		return version{}, false
	}
	rec.version.ID = id
	b.records.put(key, rec.version)
	return rec.version, true
}

// recordCache remembers records this process read or wrote. A record
// describes one file version by its identity and never changes, and a
// replaced file's identity does not come back, so a cached record is
// never stale; it only saves reading the record file.
type recordCache struct {
	mu sync.Mutex
	m  map[recordKey]version
}

type recordKey struct {
	key string
	id  fileID
}

// maxCachedRecords bounds the cache; it is emptied when full.
const maxCachedRecords = 4096

func (c *recordCache) get(key string, id fileID) (version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[recordKey{key, id}]
	return v, ok
}

func (c *recordCache) drop(key string, id fileID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, recordKey{key, id})
}

func (c *recordCache) put(key string, v version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedRecords {
		c.m = make(map[recordKey]version)
	}
	c.m[recordKey{key, v.ID}] = v
}

// writeRecord stores the record of version v of key. With durable set, the
// record and its folder entry are synced, so that the record survives a
// crash before the object it describes is renamed into place; a record
// that only repairs a lost one need not be.
func (b *Bucket) writeRecord(key string, v version, durable bool) error {
	data, err := json.Marshal(record{Key: key, version: v})
	if err != nil {
		return err
	}
	var tmp string
	if durable {
		tmp, err = b.writeTemp(data)
	} else {
		tmp, err = b.writeTempNoSync(data)
	}
	if err != nil {
		return err
	}
	target := b.recordPath(key, v.ID)
	for range maxAttempts {
		err = os.Rename(tmp, target)
		if !errors.Is(err, os.ErrNotExist) {
			break
		}
		// The key's folder is new, or a delete just removed it. It is
		// made durably even for a record that need not be: a later
		// durable record in it relies on the folder's entry.
		if err = b.mkdirSynced(filepath.Dir(target)); err != nil {
			break
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write object record: %w", err)
	}
	if durable {
		if err := paths.SyncDir(filepath.Dir(target)); err != nil {
			return err
		}
	}
	b.records.put(key, v)
	return nil
}

// mkdirSynced creates dir and its missing parents inside .podmin/objects,
// syncing each new entry.
func (b *Bucket) mkdirSynced(dir string) error {
	parent := filepath.Dir(dir)
	if parent != b.metaPath("objects") && !isDir(parent) {
		if err := b.mkdirSynced(parent); err != nil {
			return err
		}
	}
	err := syscall.Mkdir(dir, 0o700)
	switch {
	case errors.Is(err, syscall.EEXIST):
		return nil
	case errors.Is(err, syscall.ENOENT) && parent == b.metaPath("objects"):
		// A bucket made by an older version has no objects folder yet.
		if err := b.ensureMeta(); err != nil {
			return err
		}
		return b.mkdirSynced(dir)
	case err != nil:
		return &os.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	return paths.SyncDir(parent)
}

// removeRecord deletes the record of version id of key, and the key's
// folder when that was its last record. A write that has just made the
// folder again retries (writeRecord).
func (b *Bucket) removeRecord(key string, id fileID) {
	b.records.drop(key, id)
	_ = os.Remove(b.recordPath(key, id))
	_ = syscall.Rmdir(b.recordDir(key))
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
	if v, ok := b.readRecord(key, id); ok {
		return v, nil
	}
	if err := b.requireBucket(); err != nil {
		return version{}, err
	}
	if mode == trustRecord {
		return version{}, errStale
	}
	hashed := time.Now()
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, fi.Size()), make([]byte, min(fi.Size()+1, 64<<10)))
	if err != nil {
		return version{}, err
	}
	if n != fi.Size() {
		return version{}, fmt.Errorf("file changed size while hashing: %w", errStale)
	}
	v := version{ID: id, ETag: quote(h.Sum(nil))}
	if mode == hashAndRepair && fi.ModTime().Before(hashed.Add(-stampLag)) {
		// A lost or failed repair only means a later read hashes again.
		// A file modified in the last stampLag is not recorded: an edit
		// in the same clock tick would keep its identity.
		_ = b.writeRecord(key, v, false)
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
		Key:           key,
		ETag:          v.ETag,
		Size:          fi.Size(),
		LastModified:  fi.ModTime(),
		Metadata:      objstore.CloneMetadata(v.Metadata),
		ContentSHA256: strings.Trim(v.ETag, `"`),
	}
}
