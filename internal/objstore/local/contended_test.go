// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// BenchmarkContendedCAS measures committed compare-and-swap increments of
// one key per second with 1 and 32 concurrent writers: the lock is held
// for the rename only, so contention costs retries, not waiting on syncs.
func BenchmarkContendedCAS(b *testing.B) {
	for _, writers := range []int{1, 32} {
		b.Run(strconv.Itoa(writers)+"writers", func(b *testing.B) {
			s := newBucket(b)
			ctx := b.Context()
			if _, err := s.Put(ctx, "counter", []byte("0")); err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			left := b.N
			take := func() bool {
				mu.Lock()
				defer mu.Unlock()
				left--
				return left >= 0
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for take() {
						for {
							obj, err := s.Get(ctx, "counter", objstore.GetOptions{})
							if err != nil {
								b.Error(err)
								return
							}
							n, _ := strconv.Atoi(string(obj.Data))
							_, err = s.PutIfMatch(ctx, "counter", []byte(strconv.Itoa(n+1)), obj.ETag)
							if err == nil {
								break
							}
							if !errors.Is(err, objstore.ErrPrecondition) {
								b.Error(err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
