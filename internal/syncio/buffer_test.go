// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package syncio

import (
	"strings"
	"sync"
	"testing"
)

// Concurrent writers lose no byte (run with -race).
func TestBufferConcurrentWriters(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("podmin\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "podmin\n"); got != 800 || b.Len() != 800*7 {
		t.Fatalf("%d lines, %d bytes; want 800 lines of 7 bytes", got, b.Len())
	}
}
