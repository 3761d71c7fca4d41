// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package workload

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/pki"
)

// hookStore runs before (once) ahead of the next conditional write.
type hookStore struct {
	Objects
	mu     sync.Mutex
	before func()
}

func (h *hookStore) fire() {
	h.mu.Lock()
	f := h.before
	h.before = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

func (h *hookStore) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	h.fire()
	return h.Objects.PutIfAbsent(ctx, key, data)
}

func (h *hookStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	h.fire()
	return h.Objects.PutIfMatch(ctx, key, data, etag)
}

// TestRotationOnRealStores runs leader rotation with external publication
// against the local directory bucket and against a real S3 server
// (versitygw): two leaders race and the superseded one's write is refused
// by the ETag.
func TestRotationOnRealStores(t *testing.T) {
	type target struct {
		name        string
		bucket, ext func(t *testing.T) objstore.Store
	}
	// The S3 case runs against a real versitygw process (built once when
	// PODMIN_VERSITYGW does not name one), never skipped: it is the
	// evidence that rotation holds on S3's conditional writes.
	var srv *objstoretest.S3Server
	var once sync.Once
	start := func(t *testing.T) *objstoretest.S3Server {
		once.Do(func() { srv = objstoretest.StartVersityGW(t) })
		return srv
	}
	targets := []target{
		{"local", func(t *testing.T) objstore.Store { return newBucket(t) }, func(t *testing.T) objstore.Store { return newBucket(t) }},
		{"s3",
			func(t *testing.T) objstore.Store { return s3storetest.NewBucket(t, start(t)) },
			func(t *testing.T) objstore.Store { return s3storetest.NewBucket(t, start(t)) }},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			key, clk := newKey(t), &clock{t: t0}
			bucket, extBucket := tg.bucket(t), tg.ext(t)
			ext := &External{Store: extBucket, Key: "trust/demo.pem"}
			a := newManager(t, agentOpts{store: bucket, key: key, clock: clk, external: ext})
			hooked := &hookStore{Objects: bucket}
			b := newManager(t, agentOpts{store: hooked, key: key, clock: clk, external: ext})
			mustRefresh(t, a)
			mustRefresh(t, b)
			first := readState(t, bucket, key)
			clk.t = first.Active.NotAfter.Add(-pki.RotateBefore)
			hooked.before = func() {
				if err := a.Rotate(ctx); err != nil {
					t.Errorf("a: %v", err)
				}
			}
			if err := b.Rotate(ctx); !errors.Is(err, ErrSuperseded) {
				t.Fatalf("superseded leader: %v, want ErrSuperseded", err)
			}
			st := readState(t, bucket, key)
			obj, err := extBucket.Get(ctx, ext.Key, objstore.GetOptions{})
			if err != nil || !bytes.Equal(obj.Data, st.BundlePEM()) || len(st.Certs()) != 2 {
				t.Fatalf("external copy after a's rotation: %v", err)
			}
			// b continues from a's state: observe, wait, promote.
			if err := b.Rotate(ctx); err != nil {
				t.Fatal(err)
			}
			clk.Add(pki.Propagation)
			if err := b.Rotate(ctx); err != nil {
				t.Fatal(err)
			}
			final := readState(t, bucket, key)
			if final.Retired == nil || !final.Active.Equal(st.Pending) {
				t.Fatalf("not promoted: %+v", final)
			}
			if _, err := a.Refresh(ctx); err != nil || !bytes.Equal(a.Bundle(), final.BundlePEM()) {
				t.Fatalf("a did not follow: %v", err)
			}
		})
	}
}
