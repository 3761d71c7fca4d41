// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"fmt"
	"path"
	"strings"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// proveBucket decides whether destroy may delete the bucket: only when
// the context holds the nonce connect drew before it created the bucket and
// the bucket's tags still carry it (owned). A bucket connect found existing
// (no nonce in the context) is never deleted, whatever its tags say. It
// fails closed, before anything is deleted, when the tags cannot be read,
// name another cluster, or do not carry the context's nonce.
func proveBucket(ctx context.Context, b objstore.BucketAdmin, c contexts.Context) (owned bool, err error) {
	tags, err := b.BucketTags(ctx)
	if err != nil {
		return false, fmt.Errorf("%w: the tags of bucket %q cannot be read (%v): Podmin will not act on a bucket whose owner it cannot check; nothing was deleted", ErrNotOwned, c.Bucket, err)
	}
	if owner, ok := tags[infra.ClusterTag]; ok && owner != c.Cluster {
		return false, fmt.Errorf("%w: bucket %q is tagged %s=%s, another cluster's, so this cluster will not delete it; nothing was deleted: destroy it from a context of cluster %q, or run \"podmin disconnect %s\" to forget this context", ErrNotOwned, c.Bucket, infra.ClusterTag, owner, owner, c.Cluster)
	}
	if c.BucketNonce == "" {
		return false, nil
	}
	if tags[infra.ClusterTag] != c.Cluster || !contexts.ProvenBy(c.BucketNonce, tags[contexts.BucketNonceTag]) {
		return false, fmt.Errorf("%w: bucket %q does not carry the %s this context recorded when connect created it (the bucket was replaced or its tags were changed), so Podmin cannot prove it is the bucket it created; nothing was deleted: check the bucket, then delete it yourself if it should go and run \"podmin disconnect %s\"", ErrNotOwned, c.Bucket, contexts.BucketNonceTag, c.Cluster)
	}
	return true, nil
}

// podminPrefixes are the keys of the bucket layout (internal/state) and
// connect's probe objects: what destroy deletes from a bucket it keeps.
func podminPrefixes() []string {
	return []string{
		path.Dir(state.TFStatePath) + "/",
		state.DependenciesPrefix,
		state.AppsPrefix,
		state.MirrorPrefix,
		path.Dir(state.IndexPath) + "/",
		state.NodeGroupsPrefix,
		state.ServicesPrefix,
		path.Dir(state.DNSLeaderPath) + "/",
		path.Dir(state.IdentityCAPath) + "/",
		strings.SplitAfter(state.NodeGroupStatusPrefix, "/")[0],
		"probes/connect-",
	}
}

// adoptedBucketStep is destroy's plan step for a bucket it keeps: which of
// Podmin's objects it deletes.
func adoptedBucketStep(ctx context.Context, b objstore.Store, c contexts.Context) (string, error) {
	var parts []string
	total := 0
	for _, p := range podminPrefixes() {
		objs, err := objstore.ListAll(ctx, b, p)
		if err != nil {
			return "", fmt.Errorf("list bucket %q: %w", c.Bucket, err)
		}
		if len(objs) > 0 {
			parts = append(parts, fmt.Sprintf("%s (%d)", p, len(objs)))
			total += len(objs)
		}
	}
	step := fmt.Sprintf("keep bucket %s, which existed before connect (Podmin never deletes a bucket it did not create), and every object outside Podmin's layout", c.Bucket)
	if total == 0 {
		return step + "; it holds no Podmin objects", nil
	}
	return fmt.Sprintf("%s; delete Podmin's %d objects: %s", step, total, strings.Join(parts, ", ")), nil
}
