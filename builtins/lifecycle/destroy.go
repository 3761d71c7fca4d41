// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
)

// TeardownOptions are the inputs of teardown.
type TeardownOptions struct {
	// Confirm is asked after the plan is shown and before anything is
	// destroyed; nil means already confirmed.
	Confirm func(plan PlanSummary) error
}

// TeardownResult reports what teardown did.
type TeardownResult struct {
	Cluster string      `json:"cluster"`
	Plan    PlanSummary `json:"plan"`
	// Kept lists what teardown deliberately leaves in place.
	Kept []string `json:"kept"`
}

// DestroyOptions are the inputs of destroy.
type DestroyOptions struct {
	// Confirm is asked after the ownership checks and the plan, before
	// anything is deleted; nil means already confirmed.
	Confirm func(plan PlanSummary) error
}

// DestroyResult reports what destroy did.
type DestroyResult struct {
	Cluster string         `json:"cluster"`
	Plan    PlanSummary    `json:"plan"`
	Secrets []SecretAction `json:"secrets"`
	// ObjectsDeleted counts the objects emptied from the bucket.
	ObjectsDeleted int `json:"objectsDeleted"`
	// BucketDeleted is false when the bucket was already gone (a re-run
	// of an interrupted destroy) or is kept (BucketKept).
	BucketDeleted bool `json:"bucketDeleted"`
	// BucketKept is true for a bucket connect found existing: only
	// Podmin's objects were deleted from it; the bucket and every other
	// object stay.
	BucketKept bool `json:"bucketKept"`
	// ContextRemoved is true once the saved context is gone.
	ContextRemoved bool `json:"contextRemoved"`
}

// bucketDeleter deletes an empty bucket. A provider's bucket implements it;
// without it destroy stops before deleting anything.
type bucketDeleter interface {
	DeleteBucket(ctx context.Context) error
}

// refuseForeignBucket fails when the bucket is tagged for another cluster:
// its state is not this cluster's to act on.
func refuseForeignBucket(ctx context.Context, b objstore.BucketAdmin, c contexts.Context) error {
	tags, err := b.BucketTags(ctx)
	if err != nil {
		return fmt.Errorf("%w: the tags of bucket %q cannot be read (%v): Podmin will not act on a bucket whose owner it cannot check", ErrNotOwned, c.Bucket, err)
	}
	if owner, ok := tags[infra.ClusterTag]; ok && owner != c.Cluster {
		return fmt.Errorf("%w: bucket %q is tagged %s=%s, another cluster's: nothing was changed", ErrNotOwned, c.Bucket, infra.ClusterTag, owner)
	}
	return nil
}

// Teardown destroys the cluster's compute and networking. The bucket, the
// context, both CA secrets and the public workload CA state stay, so a
// later setup restores the cluster without changing trust.
func Teardown(ctx context.Context, h Host, opts TeardownOptions) (TeardownResult, error) {
	c, err := h.CurrentContext()
	if err != nil {
		return TeardownResult{}, err
	}
	res := TeardownResult{Cluster: c.Cluster, Kept: []string{
		"bucket " + c.Bucket, "context " + c.Cluster, "CA secrets", "public workload CA state (identity/ca.json)"}}
	b, err := h.OpenBucket(ctx, c)
	if err != nil {
		return res, err
	}
	if exists, err := b.BucketExists(ctx); err != nil {
		return res, fmt.Errorf("check bucket %q: %w", c.Bucket, err)
	} else if !exists {
		return res, fmt.Errorf("bucket %q of cluster %s does not exist: there is no infrastructure state to tear down", c.Bucket, c.Cluster)
	}
	if err := refuseForeignBucket(ctx, b, c); err != nil {
		return res, err
	}
	inf, err := infraFor(ctx, h, c)
	if err != nil {
		return res, err
	}
	if res.Plan, err = inf.PlanDestroy(ctx, c); err != nil {
		return res, err
	}
	if opts.Confirm != nil {
		if err := opts.Confirm(res.Plan); err != nil {
			return res, err
		}
	}
	return res, inf.Destroy(ctx, c)
}

// Destroy tears the cluster down, permanently deletes the CA secrets this
// context created, empties and deletes the bucket, and removes the context
// only after all of that succeeded. The bucket and each CA secret are
// deleted only when they carry the create nonce this context recorded; a
// CA secret without it is kept and reported, and so is every other secret
// of the cluster (keptSecrets), with how to delete it. Every step is idempotent, so
// an interrupted destroy is completed by running it again.
func Destroy(ctx context.Context, h Host, opts DestroyOptions) (DestroyResult, error) {
	c, err := h.CurrentContext()
	if err != nil {
		return DestroyResult{}, err
	}
	res := DestroyResult{Cluster: c.Cluster}
	b, err := h.OpenBucket(ctx, c)
	if err != nil {
		return res, err
	}
	deleter, ok := b.(bucketDeleter)
	if !ok {
		return res, fmt.Errorf("provider %s cannot delete buckets in this build: nothing was deleted; run \"podmin teardown\", delete bucket %q yourself, then run \"podmin disconnect %s\"", c.Provider, c.Bucket, c.Cluster)
	}
	exists, err := b.BucketExists(ctx)
	if err != nil {
		return res, fmt.Errorf("check bucket %q: %w", c.Bucket, err)
	}
	var inf Infra
	owned := false
	if exists {
		// Every proof comes first: a refusal leaves everything in place.
		if owned, err = proveBucket(ctx, b, c); err != nil {
			return res, err
		}
		if inf, err = infraFor(ctx, h, c); err != nil {
			return res, err
		}
		if res.Plan, err = inf.PlanDestroy(ctx, c); err != nil {
			return res, err
		}
	}
	// The CA secrets are proven before the confirmation too: only those
	// carrying this context's create nonce are destroyed.
	store, caPlan, err := planCASecrets(ctx, h, c)
	if err != nil {
		return res, err
	}
	res.Plan.Steps = append(res.Plan.Steps, caPlanSteps(caPlan)...)
	// Every other secret of the cluster stays: the plan lists each, with
	// how to delete it.
	kept := keptSecrets(ctx, h, c)
	res.Plan.Steps = append(res.Plan.Steps, keptSecretSteps(kept)...)
	switch {
	case exists && owned:
		res.Plan.Steps = append(res.Plan.Steps, "empty and delete bucket "+c.Bucket)
	case exists:
		step, err := adoptedBucketStep(ctx, b, c)
		if err != nil {
			return res, err
		}
		res.Plan.Steps = append(res.Plan.Steps, step)
	}
	res.Plan.Steps = append(res.Plan.Steps, "remove context "+c.Cluster)
	if opts.Confirm != nil {
		if err := opts.Confirm(res.Plan); err != nil {
			return res, err
		}
	}
	if exists {
		if err := inf.Destroy(ctx, c); err != nil {
			return res, err
		}
	}
	res.Secrets, err = destroyCASecrets(ctx, h, c, store, caPlan)
	res.Secrets = append(res.Secrets, kept...)
	if err != nil {
		return res, err
	}
	if exists && !owned {
		if res.ObjectsDeleted, err = emptyBucket(ctx, h, b, c, podminPrefixes()); err != nil {
			return res, err
		}
		res.BucketKept = true
	}
	if exists && owned {
		if res.ObjectsDeleted, err = emptyBucket(ctx, h, b, c, []string{""}); err != nil {
			return res, err
		}
		progressf(h, "deleting bucket %s", c.Bucket)
		if err := deleter.DeleteBucket(ctx); err != nil && !errors.Is(err, objstore.ErrBucketNotFound) {
			return res, fmt.Errorf("delete bucket %q: %w: run \"podmin destroy\" again to finish", c.Bucket, err)
		}
		res.BucketDeleted = true
	}
	if err := h.RemoveContext(c.Cluster); err != nil {
		return res, fmt.Errorf("the cluster is destroyed but its context could not be removed: %w: run \"podmin disconnect %s\"", err, c.Cluster)
	}
	res.ContextRemoved = true
	return res, nil
}

// emptyBucket deletes every object below prefixes, page by page, until a
// listing of each is empty.
func emptyBucket(ctx context.Context, h Host, b objstore.Store, c contexts.Context, prefixes []string) (int, error) {
	const maxRounds = 1000
	n := 0
	for _, prefix := range prefixes {
		for round := 0; ; round++ {
			if round == maxRounds {
				return n, fmt.Errorf("bucket %q still lists objects after %d rounds of deletes: something keeps writing to it; stop it (the node agents, other tools), then run \"podmin destroy\" again", c.Bucket, maxRounds)
			}
			page, err := b.List(ctx, prefix, objstore.ListOptions{})
			if err != nil {
				return n, fmt.Errorf("list bucket %q: %w: run \"podmin destroy\" again to finish", c.Bucket, err)
			}
			if len(page.Objects) == 0 {
				break
			}
			for _, o := range page.Objects {
				if err := b.Delete(ctx, o.Key, ""); err != nil {
					return n, fmt.Errorf("empty bucket %q: delete %s: %w: run \"podmin destroy\" again to finish", c.Bucket, o.Key, err)
				}
				n++
			}
			progressf(h, "emptied %d objects from bucket %s", n, c.Bucket)
		}
	}
	return n, nil
}
