// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
	"context"
	"encoding/json"
	"fmt"

	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/overlay"
)

// provider wraps a real provider so every bucket it opens is one overlay
// per bucket for the whole dry run.
type provider struct {
	cloud.Provider
	r *Recorder
}

// OpenBucket implements cloud.Provider.
func (p *provider) OpenBucket(ctx context.Context, ref cloud.BucketRef) (objstore.Bucket, error) {
	key := p.Name() + "\x00" + ref.Bucket + "\x00" + ref.Region + "\x00" + ref.Profile
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if b, ok := p.r.buckets[key]; ok {
		return b.bucket, nil
	}
	real, err := p.Provider.OpenBucket(ctx, ref)
	if err != nil {
		return nil, err
	}
	b := &bucketSource{
		bucket: overlay.NewBucket(real, overlay.Options{Sequence: &p.r.seq, Region: ref.Region}),
		where:  fmt.Sprintf("bucket %s (%s)", ref.Bucket, p.Name()),
		name:   ref.Bucket, provider: "provider " + p.Name(),
	}
	p.r.buckets[key] = b
	p.r.sources = append(p.r.sources, b)
	return b.bucket, nil
}

// Buckets returns the overlays of every bucket the dry run opened, by
// their Where name.
func (r *Recorder) Buckets() map[string]*overlay.Bucket {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*overlay.Bucket{}
	for _, b := range r.buckets {
		out[b.where] = b.bucket
	}
	return out
}

// bucketSource turns an overlay's records into records.
type bucketSource struct {
	bucket         *overlay.Bucket
	where          string
	name, provider string
}

func (b *bucketSource) records() []record {
	var out []record
	for _, a := range b.bucket.AdminRecords() {
		rec := record{seq: a.Seq, kind: KindBucket, where: b.provider, target: b.name}
		switch a.Op {
		case overlay.OpCreateBucket:
			rec.after = state{exists: true}
		case overlay.OpDeleteBucket:
			rec.before = state{exists: true}
		case overlay.OpSetTags:
			tags, _ := json.Marshal(a.Tags)
			rec.kind = KindBucketTags
			rec.before = state{exists: true, data: []byte("{}")}
			rec.after = state{exists: true, data: tags}
		}
		out = append(out, rec)
	}
	for _, o := range b.bucket.Records() {
		out = append(out, record{seq: o.Seq, kind: KindObject, where: b.where, target: o.Key,
			before: state{exists: o.Before.Exists, data: o.Before.Data},
			after:  state{exists: o.After.Exists, data: o.After.Data}})
	}
	return out
}
