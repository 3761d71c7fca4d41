// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"podmin.dev/podmin/internal/objstore"
)

// Object metadata of deployments/index.json. The body stays exactly the
// specification's format; the write IDs ride beside it.
const (
	// WriteIDMeta holds the random ID of the write that produced this
	// version of the index.
	WriteIDMeta = "podmin-write-id"
	// WriteChainMeta holds the IDs of the versions before it, newest first,
	// comma-separated.
	WriteChainMeta = "podmin-write-chain"
	// maxWriteChain bounds the IDs one version records, its own included:
	// 24 IDs of 16 hex characters (407 bytes with their commas) leave room
	// in indexMetaBudget for the NodeGroup history, so the HEAD every node
	// makes per commit returns at most 1,000 bytes of metadata. The deeper the
	// chain, the more commits may follow a landed write whose reply was
	// lost before it can no longer be found (its outcome is then reported
	// unknown, never guessed); 64 random bits keep an accidental match
	// among 24 IDs below 1 in 10^17.
	maxWriteChain = 24
	// indexMetaBudget bounds all the metadata of one index version, keys
	// and values: a node reads it with every commit, its own NodeGroup's
	// or not. The NodeGroup history gets what the chain leaves.
	indexMetaBudget = 1000
	// writeIDLen is the length of a write ID: 8 random bytes in hex.
	writeIDLen = 16
)

// randomWriteID is 8 bytes from crypto/rand in lowercase hex.
func randomWriteID() string {
	var b [writeIDLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func validWriteID(id string) bool {
	if len(id) != writeIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !isDigit(id[i]) && (id[i] < 'a' || id[i] > 'f') {
			return false
		}
	}
	return true
}

// indexVersion is one read of the index.
type indexVersion struct {
	ix     *Index
	etag   string
	exists bool
	// chain is the write IDs of this version and the versions before it,
	// newest first, at most maxWriteChain; empty for an index written
	// without IDs (or absent).
	chain []string
	// hist is which NodeGroups the recent writes changed.
	hist ngHistory
}

// chainFrom reads the write IDs from index metadata. A version without a
// valid own ID has no chain; invalid earlier IDs end the chain there.
func chainFrom(meta map[string]string) []string {
	id := meta[WriteIDMeta]
	if !validWriteID(id) {
		return nil
	}
	chain := []string{id}
	if rest := meta[WriteChainMeta]; rest != "" {
		for _, p := range strings.Split(rest, ",") {
			if !validWriteID(p) || len(chain) == maxWriteChain {
				break
			}
			chain = append(chain, p)
		}
	}
	return chain
}

// writeMeta is the metadata of a write with ID id on top of base making
// change c: the chain, and the NodeGroup history as far as it fits.
func writeMeta(id string, base indexVersion, c change) map[string]string {
	prev := base.chain[:min(len(base.chain), maxWriteChain-1)]
	m := map[string]string{WriteIDMeta: id}
	if len(prev) > 0 {
		m[WriteChainMeta] = strings.Join(prev, ",")
	}
	m[WriteNodeGroupsMeta] = base.hist.next(c, len(base.chain), len(prev)+1).fit(m).encode()
	return m
}

// writeResolution is what a re-read says about a write whose reply was lost.
type writeResolution int

const (
	writeNotLanded writeResolution = iota
	writeLanded
	// The write may or may not have landed:
	// unknownFork: the index changed since the write's base;
	unknownFork
	// unknownOverflow: more writes followed than a chain records;
	unknownOverflow
	// unknownNoID: the base carries no write ID to compare with.
	unknownNoID
)

// reason explains an unknown resolution to the operator.
func (r writeResolution) reason() string {
	switch r {
	case unknownOverflow:
		return fmt.Sprintf("the index records the IDs of the last %d writes, and neither the failed write's nor that of the version it replaced is among them: more index writes followed than that, or a stale write recorded an older history", maxWriteChain-1)
	case unknownNoID:
		return "the index version the failed write replaced carries no write ID, so it cannot be told from a later version with the same content"
	}
	return "another writer changed the index before the failed write could be confirmed, and an index whose content returns to an earlier version's (a deploy and a delete of the same entry, say) lets a stale write land without a trace of this one"
}

// resolveWrite decides whether the write with ID id, conditional on base,
// landed, judging by the version cur read after it. Content and ETags are
// never compared: both are functions of the body, and the body returns to
// earlier bytes whenever writers undo each other. So:
//
//   - id is in cur's chain: it landed (and may have been built upon
//     since). Only the write with that ID records it, and only a version
//     that existed can be read and built upon.
//   - cur's own ID is base's own ID: cur is base itself, the very version
//     the write was conditional on, so nothing has replaced it; the write
//     did not land. (Each ID is written by exactly one request.)
//   - base and cur are both absent: the create-only write did not land,
//     because nothing deletes the index.
//   - otherwise it is unknown, even when base's ID is in cur's chain. An
//     If-Match write lands on any version whose ETag equals the one it
//     read, and ETags are hashes of the body: when the body returns to the
//     bytes of an earlier version, a writer that read that earlier version
//     overwrites the current one and records the earlier version's chain,
//     erasing the IDs in between, this write's among them. What cur's
//     chain says about the history before its newest ID cannot be trusted
//     to mean this write is absent.
func resolveWrite(id string, base, cur indexVersion) writeResolution {
	switch {
	case slices.Contains(cur.chain, id):
		return writeLanded
	case !base.exists && !cur.exists:
		return writeNotLanded
	case base.exists && len(base.chain) == 0:
		return unknownNoID
	case base.exists && len(cur.chain) > 0 && cur.chain[0] == base.chain[0]:
		return writeNotLanded
	case len(cur.chain) == maxWriteChain && (!base.exists || !slices.Contains(cur.chain, base.chain[0])):
		return unknownOverflow
	}
	return unknownFork
}

// retryableRead reports whether a failed index read is worth another round.
// A missing bucket is not: it is never "no index yet".
func retryableRead(err error) bool {
	return !errors.Is(err, ErrInvalidIndex) && !errors.Is(err, objstore.ErrBucketNotFound)
}

// readIndexVersion reads the index with its ETag and write IDs. A missing
// index in a bucket that exists is an empty index; a missing bucket is an
// error wrapping objstore.ErrBucketNotFound.
func readIndexVersion(ctx context.Context, store objstore.Store) (indexVersion, error) {
	obj, err := store.Get(ctx, IndexPath, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return indexVersion{ix: NewIndex()}, nil
	}
	if err != nil {
		return indexVersion{}, fmt.Errorf("read %s: %w", IndexPath, err)
	}
	ix, err := DecodeIndex(obj.Data)
	if err != nil {
		return indexVersion{}, err
	}
	m := ParseIndexMeta(obj.Metadata)
	return indexVersion{ix: ix, etag: obj.ETag, exists: true, chain: m.Chain, hist: m.hist}, nil
}

// writeIndex writes data conditionally on base (create-only when base did
// not exist), carrying write ID id and base's chain in the object metadata.
//
// A store that keeps no metadata (a dry run's in-memory overlay) refuses
// the options before sending anything; the write is then made without IDs.
// Nothing is lost for correctness: without IDs an ambiguous write resolves
// only when nothing happened since, and is otherwise reported unknown,
// never applied twice. It reports whether the metadata was kept: without
// it, NodeGroup views could not be checked, so none is written.
func (c *Committer) writeIndex(ctx context.Context, base indexVersion, data []byte, id string, ch change) (bool, error) {
	opts := objstore.PutOptions{IfAbsent: !base.exists, Metadata: writeMeta(id, base, ch)}
	if base.exists {
		opts.IfMatch = base.etag
	}
	_, err := objstore.PutWithOptions(ctx, c.store, IndexPath, data, opts)
	if errors.Is(err, objstore.ErrMetadataUnsupported) {
		opts.Metadata = nil
		_, err = objstore.PutWithOptions(ctx, c.store, IndexPath, data, opts)
		return false, err
	}
	return true, err
}
