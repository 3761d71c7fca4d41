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

// Writer persists one leadership's snapshots. Begin takes the leadership's
// lease term and claims a generation above the stored one; each Write is a
// compare-and-swap on the ETag of the writer's previous write, and a
// refused swap that finds a later leadership stored (a higher term, or
// within the term a higher generation or the same generation of another
// leader) ends the writer with ErrSuperseded. A stale write from an
// earlier leader that slipped in between, a corrupt object and a deleted
// one are simply written over: Verify finds them.
type Writer struct {
	store    Store
	key      string
	leaderID string

	term, gen, rev uint64
	etag           string
	exists         bool
	last           *pb.ServiceSnapshot
	fenced         bool
	// stale reports that the stored object is not this writer's last
	// write (deleted, corrupt or overwritten): the next Write rewrites it.
	stale bool
}

// NewWriter returns a writer for leaderID; Begin must run first.
func NewWriter(store Store, leaderID string) *Writer {
	return &Writer{store: store, key: SnapshotKey, leaderID: leaderID}
}

// StaleTermError reports a stored snapshot whose term is not below the
// term a new leadership claimed: the lease history was reset (its object
// deleted) while the snapshot survived. The leadership must step down and
// the next one claim a term above Stored.
type StaleTermError struct {
	Stored, Term uint64
	LeaderID     string
}

func (e *StaleTermError) Error() string {
	return fmt.Sprintf("%s holds term %d (by %s), not below this leadership's term %d: the next leadership claims a higher term",
		SnapshotKey, e.Stored, e.LeaderID, e.Term)
}

// read returns the stored snapshot (nil when there is none), its ETag
// and its bytes; corrupt reports a stored object that does not decode.
func (w *Writer) read(ctx context.Context) (s *pb.ServiceSnapshot, etag string, data []byte, corrupt bool, err error) {
	obj, err := w.store.Get(ctx, w.key, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, "", nil, false, nil
	}
	if err != nil {
		return nil, "", nil, false, fmt.Errorf("read %s: %w", w.key, err)
	}
	s, err = Unmarshal(obj.Data)
	if err != nil {
		// A corrupt snapshot counts as term and generation zero and is
		// written over.
		return &pb.ServiceSnapshot{}, obj.ETag, obj.Data, true, nil
	}
	return s, obj.ETag, obj.Data, false, nil
}

// Begin claims the next generation under the lease term. It returns the
// stored snapshot (nil when none or corrupt) so a new leader can start
// from its Service identities and node registrations.
func (w *Writer) Begin(ctx context.Context, term uint64) (*pb.ServiceSnapshot, error) {
	s, etag, _, corrupt, err := w.read(ctx)
	if err != nil {
		return nil, err
	}
	if s != nil && (s.GetTerm() > term || s.GetTerm() == term && term > 0) {
		return nil, &StaleTermError{Stored: s.GetTerm(), Term: term, LeaderID: s.GetLeaderId()}
	}
	w.term, w.gen, w.rev, w.etag, w.exists, w.fenced, w.stale = term, s.GetGeneration()+1, 0, etag, s != nil, false, false
	w.last = nil
	if corrupt {
		return nil, nil
	}
	return s, nil
}

// Generation is the writer's generation (zero before Begin).
func (w *Writer) Generation() uint64 { return w.gen }

// Term is the writer's lease term.
func (w *Writer) Term() uint64 { return w.term }

// outranks reports whether the stored snapshot cur belongs to a later
// leadership than this writer's: a higher term, a higher generation in the
// same term, or the same generation claimed by another leader.
func (w *Writer) outranks(cur *pb.ServiceSnapshot) bool {
	switch {
	case cur.GetTerm() != w.term:
		return cur.GetTerm() > w.term
	case cur.GetGeneration() != w.gen:
		return cur.GetGeneration() > w.gen
	default:
		return cur.GetLeaderId() != w.leaderID
	}
}

// Verify checks, with one conditional read, that the stored object is
// still this writer's last write. A deleted, corrupt or overwritten object
// makes the next Write rewrite it, and Verify names what it found; a
// later leadership's snapshot ends the writer with ErrSuperseded.
func (w *Writer) Verify(ctx context.Context) (string, error) {
	if w.fenced {
		return "", ErrSuperseded
	}
	if w.gen == 0 || w.rev == 0 {
		return "", nil // nothing of this leadership is stored yet
	}
	obj, err := w.store.Get(ctx, w.key, objstore.GetOptions{IfNoneMatch: w.etag})
	switch {
	case errors.Is(err, objstore.ErrNotModified):
		return "", nil
	case errors.Is(err, objstore.ErrNotFound):
		w.exists, w.stale = false, true
		return "it was deleted", nil
	case err != nil:
		return "", fmt.Errorf("verify %s: %w", w.key, err)
	}
	cur, err := Unmarshal(obj.Data)
	if err != nil {
		w.etag, w.exists, w.stale = obj.ETag, true, true
		return "it is corrupt", nil
	}
	if w.outranks(cur) {
		w.fenced = true
		return "", fmt.Errorf("verify %s: term %d generation %d of %s is stored, this leader holds term %d generation %d: %w",
			w.key, cur.GetTerm(), cur.GetGeneration(), cur.GetLeaderId(), w.term, w.gen, ErrSuperseded)
	}
	w.etag, w.exists, w.stale = obj.ETag, true, true
	return fmt.Sprintf("an earlier write (term %d generation %d of %s) replaced it", cur.GetTerm(), cur.GetGeneration(), cur.GetLeaderId()), nil
}

// Write persists s (its Services and nodes) as the writer's next revision
// and returns the snapshot written. An unchanged content is not written
// again unless nothing of this generation is stored yet or Verify found
// the stored object replaced.
func (w *Writer) Write(ctx context.Context, s *pb.ServiceSnapshot) (*pb.ServiceSnapshot, error) {
	if w.gen == 0 {
		return nil, errors.New("snapshot writer: Begin has not run")
	}
	if w.fenced {
		return nil, ErrSuperseded
	}
	if w.rev > 0 && !w.stale && sameContent(w.last, s) {
		return w.last, nil
	}
	next := &pb.ServiceSnapshot{Term: w.term, Generation: w.gen, Revision: w.rev + 1, LeaderId: w.leaderID, Services: s.GetServices(), Nodes: s.GetNodes()}
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
			w.rev, w.etag, w.exists, w.last, w.stale = next.Revision, etag, true, next, false
			return next, nil
		}
		// Refused or ambiguous: see what is stored now.
		cur, curETag, curData, _, rerr := w.read(ctx)
		if rerr != nil {
			return nil, fmt.Errorf("write %s: %w (and rereading it: %v)", w.key, err, rerr)
		}
		if cur != nil && bytes.Equal(curData, data) {
			// The ambiguous write landed.
			w.rev, w.etag, w.exists, w.last, w.stale = next.Revision, curETag, true, next, false
			return next, nil
		}
		if w.outranks(cur) {
			w.fenced = true
			return nil, fmt.Errorf("write %s: term %d generation %d of %s is stored, this leader holds term %d generation %d: %w",
				w.key, cur.GetTerm(), cur.GetGeneration(), cur.GetLeaderId(), w.term, w.gen, ErrSuperseded)
		}
		if !errors.Is(err, objstore.ErrPrecondition) && !errors.Is(err, objstore.ErrNotFound) && cur.GetTerm() == w.term && cur.GetGeneration() == w.gen && curETag == w.etag {
			return nil, fmt.Errorf("write %s: %w", w.key, err) // transient: the caller retries
		}
		// An earlier leadership wrote in between (or ours was ambiguous
		// and something else landed): write over it, still fenced by our
		// ETag.
		w.etag, w.exists = curETag, cur != nil
	}
	return nil, fmt.Errorf("write %s: the object kept changing under this leader", w.key)
}
