// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
)

// BenchmarkCommitToStatusReady measures one commit of a new image until
// podmin status shows it ready on all three nodes: three local agents on
// a local bucket, fake kubelets whose Pods are ready as soon as they run
// (a real kubelet adds its own Pod replacement, about 15 s). With
// maxUnavailable 1 the nodes update one after the other; with 100% at
// once. The wait polls every 5 ms.
//
//	go test ./cmd/podmin-agent -run '^$' -bench CommitToStatusReady -benchtime 20x
func BenchmarkCommitToStatusReady(b *testing.B) {
	for _, mu := range []string{"1", "100%"} {
		b.Run("maxUnavailable="+mu, func(b *testing.B) {
			f := newFleet(b, 3)
			for i := range 3 {
				f.start(i, readyAt(0))
			}
			ctx := context.Background()
			if _, err := f.deploy(ctx, "hello:v0", mu, ""); err != nil {
				b.Fatal(err)
			}
			f.eventually(time.Minute, "v0 ready", func() bool { return f.statusOf("web").State == builtins.StateReady })
			b.ResetTimer()
			for i := range b.N {
				r, err := f.deploy(ctx, fmt.Sprintf("hello:v%d", i+1), mu, "")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.env.Wait(ctx, builtins.WaitOptions{Name: "web", NodeGroup: "workers", Revision: r.Revision, Timeout: time.Minute, Poll: 5 * time.Millisecond}); err != nil {
					b.Fatalf("%v\n%s", err, f.logs())
				}
			}
		})
	}
}
