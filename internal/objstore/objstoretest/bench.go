// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"fmt"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// benchSize is the object size of every benchmark: the order of a
// deployments index or a small manifest.
const benchSize = 1 << 10

// RunBenchmarks measures the operations on Podmin's hot paths. newStore
// must return a fresh, empty store for each sub-benchmark.
func RunBenchmarks(b *testing.B, newStore func(b *testing.B) objstore.Store) {
	data := make([]byte, benchSize)
	for i := range data {
		data[i] = byte(i)
	}
	b.Run("Get", func(b *testing.B) {
		s := newStore(b)
		if _, err := s.Put(b.Context(), "bench/get", data); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Get(b.Context(), "bench/get", objstore.GetOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PutIfMatch", func(b *testing.B) {
		s := newStore(b)
		etag, err := s.Put(b.Context(), "bench/cas", data)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			data[0] = byte(i) // a new ETag every time
			if etag, err = s.PutIfMatch(b.Context(), "bench/cas", data, etag); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PutIfAbsent", func(b *testing.B) {
		s := newStore(b)
		b.SetBytes(benchSize)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := s.PutIfAbsent(b.Context(), fmt.Sprintf("bench/once/%d", i), data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
