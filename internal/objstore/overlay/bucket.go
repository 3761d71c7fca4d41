// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package overlay

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"podmin.dev/podmin/internal/objstore"
)

// AdminOp is the kind of a recorded bucket administration.
type AdminOp string

// The recorded bucket administrations.
const (
	OpCreateBucket AdminOp = "create-bucket"
	OpSetTags      AdminOp = "set-tags"
	OpDeleteBucket AdminOp = "delete-bucket"
)

// AdminRecord is one recorded bucket administration.
type AdminRecord struct {
	Seq  uint64
	Op   AdminOp
	Tags map[string]string
}

// Bucket is a recording overlay over a real bucket: objects behave as in
// Store, and creating the bucket or setting its tags is recorded too.
type Bucket struct {
	*Store
	real   objstore.BucketAdmin
	region string

	amu     sync.Mutex
	created bool
	deleted bool
	tags    map[string]string // nil: the real tags
	admin   []AdminRecord
}

var _ objstore.Bucket = (*Bucket)(nil)

// NewBucket returns an overlay over real, which is only ever read.
func NewBucket(real objstore.Bucket, opts Options) *Bucket {
	return &Bucket{Store: New(real, opts), real: real, region: opts.Region}
}

// AdminRecords returns the recorded administrations in order.
func (b *Bucket) AdminRecords() []AdminRecord {
	b.amu.Lock()
	defer b.amu.Unlock()
	return append([]AdminRecord(nil), b.admin...)
}

// BucketExists implements objstore.BucketAdmin.
func (b *Bucket) BucketExists(ctx context.Context) (bool, error) {
	b.amu.Lock()
	created, deleted := b.created, b.deleted
	b.amu.Unlock()
	if deleted {
		return false, nil
	}
	if created {
		return true, nil
	}
	return b.real.BucketExists(ctx)
}

// CreateBucket records the creation when the real bucket is absent.
func (b *Bucket) CreateBucket(ctx context.Context) error {
	exists, err := b.BucketExists(ctx)
	if err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("create bucket: %w", objstore.ErrBucketExists)
	}
	b.amu.Lock()
	defer b.amu.Unlock()
	b.created, b.tags = true, map[string]string{}
	b.Store.mu.Lock()
	b.Store.realGone = true
	b.Store.mu.Unlock()
	b.admin = append(b.admin, AdminRecord{Seq: b.seq.Next(), Op: OpCreateBucket})
	return nil
}

// BucketTags implements objstore.BucketAdmin.
func (b *Bucket) BucketTags(ctx context.Context) (map[string]string, error) {
	b.amu.Lock()
	tags := b.tags
	b.amu.Unlock()
	if tags != nil {
		return maps.Clone(tags), nil
	}
	return b.real.BucketTags(ctx)
}

// SetBucketTags records the new tags.
func (b *Bucket) SetBucketTags(ctx context.Context, tags map[string]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if exists, err := b.BucketExists(ctx); err != nil {
		return err
	} else if !exists {
		return fmt.Errorf("set bucket tags: %w", objstore.ErrNotFound)
	}
	tags = maps.Clone(tags)
	if tags == nil {
		tags = map[string]string{}
	}
	b.amu.Lock()
	defer b.amu.Unlock()
	b.tags = tags
	b.admin = append(b.admin, AdminRecord{Seq: b.seq.Next(), Op: OpSetTags, Tags: maps.Clone(tags)})
	return nil
}

// BucketRegion implements objstore.BucketAdmin. A bucket created in the
// overlay is in the region it was opened for; the caller knows it.
func (b *Bucket) BucketRegion(ctx context.Context) (string, error) {
	b.amu.Lock()
	created := b.created
	b.amu.Unlock()
	if created {
		return b.region, nil
	}
	return b.real.BucketRegion(ctx)
}
