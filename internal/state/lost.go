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
// still holds the NodeGroup views an index commit wrote. The index was lost (deleted by hand, or a bucket
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
// returns nil when the bucket holds no NodeGroup view: a new cluster,
// whose first deploy creates the index. A view is written only after an
// index commit, so one without its index proves the index was lost: it
// returns an *IndexMissingError naming the view. Pod payloads alone prove
// nothing: a deploy writes its payloads before the index, so two first
// deploys of a new cluster see each other's, and a deploy whose index
// write failed leaves its own behind (orphan payloads are invisible by
// design). It costs one LIST of at most one key under
// deployments/nodegroups/; call it only after an index read found
// nothing. A failed listing is returned as it is: what the absence means
// is then unknown, never "new".
func CheckIndexAbsence(ctx context.Context, store objstore.Store) error {
	page, err := store.List(ctx, ViewsPrefix, objstore.ListOptions{MaxKeys: 1})
	if err != nil {
		return fmt.Errorf("%s does not exist, and listing %s to tell a new cluster from a lost index failed: %w: run the command again", IndexPath, ViewsPrefix, err)
	}
	if len(page.Objects) > 0 {
		return &IndexMissingError{Evidence: page.Objects[0].Key}
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
