// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/internal/objstore"
)

// SnapshotKey is where the leader persists Service snapshots.
const SnapshotKey = "dns/services.pb"

// ErrSuperseded reports that a later leader has written a snapshot: this
// writer must stop writing.
var ErrSuperseded = errors.New("superseded by a later leader's snapshot")

// Store is the part of the bucket the coordinator uses.
type Store interface {
	Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error)
	PutIfAbsent(ctx context.Context, key string, data []byte) (string, error)
	PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error)
}

// Writer persists one leadership's snapshots. Begin claims a generation
// above every generation written so far; each Write is a compare-and-swap
// on the ETag of the writer's previous write, and a refused swap that finds
// a higher generation (or the same generation from another leader) ends
// the writer with ErrSuperseded. A stale write from an earlier leader that
// slipped in between is simply written over.
type Writer struct {
	store    Store
	key      string
	leaderID string

	gen, rev uint64
	etag     string
	exists   bool
	last     *pb.ServiceSnapshot
	fenced   bool
}

// NewWriter returns a writer for leaderID; Begin must run first.
func NewWriter(store Store, leaderID string) *Writer {
	return &Writer{store: store, key: SnapshotKey, leaderID: leaderID}
}

// read returns the stored snapshot (nil when there is none), its ETag
// and its bytes.
func (w *Writer) read(ctx context.Context) (*pb.ServiceSnapshot, string, []byte, error) {
	obj, err := w.store.Get(ctx, w.key, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, "", nil, nil
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("read %s: %w", w.key, err)
	}
	s, err := Unmarshal(obj.Data)
	if err != nil {
		// A corrupt snapshot counts as generation zero and is written over.
		return &pb.ServiceSnapshot{}, obj.ETag, obj.Data, nil
	}
	return s, obj.ETag, obj.Data, nil
}

// Begin claims the next generation. It returns the stored snapshot (nil
// when none) so a new leader can start from its Service identities.
func (w *Writer) Begin(ctx context.Context) (*pb.ServiceSnapshot, error) {
	s, etag, _, err := w.read(ctx)
	if err != nil {
		return nil, err
	}
	w.gen, w.rev, w.etag, w.exists, w.fenced = s.GetGeneration()+1, 0, etag, s != nil, false
	w.last = s
	return s, nil
}

// Generation is the writer's generation (zero before Begin).
func (w *Writer) Generation() uint64 { return w.gen }

// Write persists services as the writer's next revision and returns the
// snapshot written. An unchanged set of Services is not written again
// unless nothing of this generation is stored yet.
func (w *Writer) Write(ctx context.Context, s *pb.ServiceSnapshot) (*pb.ServiceSnapshot, error) {
	if w.gen == 0 {
		return nil, errors.New("snapshot writer: Begin has not run")
	}
	if w.fenced {
		return nil, ErrSuperseded
	}
	if w.rev > 0 && sameServices(w.last, s) {
		return w.last, nil
	}
	next := &pb.ServiceSnapshot{Generation: w.gen, Revision: w.rev + 1, LeaderId: w.leaderID, Services: s.GetServices()}
	data, err := Marshal(next)
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		var etag string
		if w.exists {
			etag, err = w.store.PutIfMatch(ctx, w.key, data, w.etag)
		} else {
			etag, err = w.store.PutIfAbsent(ctx, w.key, data)
		}
		if err == nil {
			w.rev, w.etag, w.exists, w.last = next.Revision, etag, true, next
			return next, nil
		}
		// Refused or ambiguous: see what is stored now.
		cur, curETag, curData, rerr := w.read(ctx)
		if rerr != nil {
			return nil, fmt.Errorf("write %s: %w (and rereading it: %v)", w.key, err, rerr)
		}
		if cur != nil && bytes.Equal(curData, data) {
			// The ambiguous write landed.
			w.rev, w.etag, w.exists, w.last = next.Revision, curETag, true, next
			return next, nil
		}
		if cur.GetGeneration() > w.gen || cur.GetGeneration() == w.gen && cur.GetLeaderId() != w.leaderID {
			w.fenced = true
			return nil, fmt.Errorf("write %s: generation %d of %s is stored, this leader holds %d: %w",
				w.key, cur.GetGeneration(), cur.GetLeaderId(), w.gen, ErrSuperseded)
		}
		if !errors.Is(err, objstore.ErrPrecondition) && !errors.Is(err, objstore.ErrNotFound) && cur.GetGeneration() == w.gen && curETag == w.etag {
			return nil, fmt.Errorf("write %s: %w", w.key, err) // transient: the caller retries
		}
		// An earlier generation wrote in between (or ours was ambiguous and
		// something else landed): write over it, still fenced by our ETag.
		w.etag, w.exists = curETag, cur != nil
	}
	return nil, fmt.Errorf("write %s: the object kept changing under this leader", w.key)
}
