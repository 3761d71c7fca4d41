// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// BenchmarkVIP measures, in one topology and one run, TCP throughput and
// connections per second from the client Pod to backend b1 through the
// Service VIP and directly to b1's address. Both paths cross the node's
// IPv6 forwarding; the VIP path adds the program's DNAT/SNAT and reverse
// NAT. Compare each vip sub-benchmark with its direct twin:
//
//	go test ./agent/dataplane -run '^$' -bench VIP -count 5
func BenchmarkVIP(b *testing.B) {
	requireRoot(b)
	tp := newTopology(b, "B")
	tp.serve(b, tp.b1, "b1")
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dp.Stop() })
	if err := dp.Apply(b.Context(), []Service{service(backend1)}); err != nil {
		b.Fatal(err)
	}
	targets := []struct {
		name string
		addr netip.Addr
	}{{"direct", backend1}, {"vip", vip}}

	for _, tg := range targets {
		b.Run("throughput/"+tg.name, func(b *testing.B) {
			c, err := tp.dial(b, netip.AddrPortFrom(tg.addr, sinkPort), 3*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				b.Fatal(err)
			}
			// The sink answers once it has read everything.
			if ok, err := io.ReadAll(c); err != nil || string(ok) != "ok" {
				b.Fatalf("sink answered %q, %v", ok, err)
			}
		})
	}
	for _, tg := range targets {
		b.Run("connect/"+tg.name, func(b *testing.B) {
			to := netip.AddrPortFrom(tg.addr, pingPort)
			start := time.Now()
			n := 0
			for b.Loop() {
				c, err := tp.dial(b, to, 3*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				var one [1]byte
				if _, err := c.Write(one[:]); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, one[:]); err != nil {
					b.Fatal(err)
				}
				c.Close()
				n++
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "conns/s")
			if s, err := dp.Stats(); err == nil && (s.NATExhausted > 0 || s.NoFlow > 0) {
				b.Logf("dataplane drops so far: %d without a free NAT port, %d without a flow", s.NATExhausted, s.NoFlow)
			}
		})
	}
}
