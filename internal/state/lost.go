// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"podmin.dev/podmin/internal/objstore"
)

// ErrIndexMissing reports a bucket without deployments/index.json that
// still holds the desired state an index committed: Pod payloads or
// NodeGroup views. The index was lost (deleted by hand, or a bucket
// emptied part way), not never written, so an empty index is the wrong
// reading of it and a fresh one the wrong answer: a fresh index holds
// only the change that created it, and every node then stops the Pods of
// every other deployment. "podmin index rebuild" restores it.
var ErrIndexMissing = errors.New("the deployments index is missing")

// RebuildAdvice is what to run when the index is missing.
const RebuildAdvice = `run "podmin index rebuild": it restores the index from the payloads in the bucket, shows its plan and asks before it writes anything`

// IndexMissingError is the error wrapping ErrIndexMissing: Evidence is an
// object proving the bucket held desired state, or "" when the index was
// read earlier in the same operation and is gone now.
type IndexMissingError struct {
	Evidence string
}

func (e *IndexMissingError) Error() string {
	var why string
	switch ng, _, err := ParsePodPath(e.Evidence); {
	case e.Evidence == "":
		why = "it was there when this operation first read it"
	case err == nil:
		why = fmt.Sprintf("the bucket holds Pod payloads of NodeGroup %s (%s%s/pods/)", ng, NodeGroupsPrefix, ng)
	case strings.HasPrefix(e.Evidence, ViewsPrefix):
		why = "the bucket holds the NodeGroup view " + e.Evidence
	default:
		why = "the bucket holds " + e.Evidence
	}
	return fmt.Sprintf("%v: %s does not exist, but %s: what was committed is unknown until the index is restored, and a new index would hold only this change, so every node would stop the Pods of all other deployments: %s", ErrIndexMissing, IndexPath, why, RebuildAdvice)
}

// Unwrap makes the error match ErrIndexMissing.
func (e *IndexMissingError) Unwrap() error { return ErrIndexMissing }

// CheckIndexAbsence says what a missing deployments/index.json means. It
// returns nil when the bucket holds no desired state at all, neither a
// Pod payload nor a NodeGroup view: a new cluster, whose first deploy
// creates the index. When it holds either, the index was lost, and it
// returns an *IndexMissingError naming the object found. It costs one
// LIST of at most one key under nodegroups/, and in a new cluster one more
// under deployments/nodegroups/; call it only after an index read found
// nothing. A failed listing is returned as it is: what the absence means
// is then unknown, never "new".
func CheckIndexAbsence(ctx context.Context, store objstore.Store) error {
	for _, prefix := range []string{NodeGroupsPrefix, ViewsPrefix} {
		page, err := store.List(ctx, prefix, objstore.ListOptions{MaxKeys: 1})
		if err != nil {
			return fmt.Errorf("%s does not exist, and listing %s to tell a new cluster from a lost index failed: %w: run the command again", IndexPath, prefix, err)
		}
		if len(page.Objects) > 0 {
			return &IndexMissingError{Evidence: page.Objects[0].Key}
		}
	}
	return nil
}

// ReadDesiredIndex reads the index as ReadIndex does, except that an
// absent index reads as the empty index only in a new cluster: when the
// bucket holds desired state (CheckIndexAbsence), the error wraps
// ErrIndexMissing. Readers that report what is committed use it, so a
// lost index is never reported as "no deployments".
func ReadDesiredIndex(ctx context.Context, store objstore.Store) (*Index, string, error) {
	v, err := readIndexVersion(ctx, store)
	if err != nil {
		return nil, "", err
	}
	if !v.exists {
		if err := CheckIndexAbsence(ctx, store); err != nil {
			return nil, "", err
		}
	}
	return v.ix, v.etag, nil
}
