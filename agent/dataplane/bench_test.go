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

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// BenchmarkVIP measures, in one topology and one run, TCP throughput and
// connections per second from the client Pod to backend b1 through the
// Service VIP and directly to b1's address. Both paths cross the node's
// IPv6 forwarding; the VIP path adds the program's DNAT/SNAT and reverse
// NAT. Compare each vip sub-benchmark with its direct twin:
//
//	go test ./agent/dataplane -run '^$' -bench VIP -count 5
//
// On a shared machine the sub-benchmarks run minutes apart and drift with
// its load; BenchmarkVIPInterleaved is the one to read a ratio from.
func BenchmarkVIP(b *testing.B) {
	tp, dp := benchTopology(b, "B")
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
			if s, err := dp.Stats(); err == nil && (s.Drops[DropNATExhausted] > 0 || s.Drops[DropNoFlow] > 0) {
				b.Logf("dataplane drops so far: %d without a free NAT port, %d without a flow", s.Drops[DropNATExhausted], s.Drops[DropNoFlow])
			}
		})
	}
}

func benchTopology(b *testing.B, tag string) (*topology, *Dataplane) {
	requireRoot(b)
	tp := newTopology(b, tag)
	tp.serve(b, tp.b1, "b1")
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dp.Stop() })
	if err := dp.Apply(b.Context(), []Service{service(backend1)}); err != nil {
		b.Fatal(err)
	}
	return tp, dp
}

// BenchmarkVIPInterleaved alternates the direct and the VIP path in short
// slices (one slice of each per iteration, the first path alternating),
// so that load from elsewhere on the machine hits both alike, and reports
// both rates and their ratio (VIP / direct):
//
//	go test ./agent/dataplane -run '^$' -bench VIPInterleaved -benchtime 20x
func BenchmarkVIPInterleaved(b *testing.B) {
	tp, dp := benchTopology(b, "I")
	const slice = 100 * time.Millisecond
	// The kernel's own account of the program's cost per run.
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer st.Close()
	}
	before, err := dp.objs.PodminVip.Stats()
	if err != nil {
		b.Fatal(err)
	}
	dialOrFail := func(to netip.AddrPort) net.Conn {
		c, err := tp.dial(b, to, 3*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	// Throughput: one long-lived connection per path, written in turns.
	streams := [2]net.Conn{dialOrFail(netip.AddrPortFrom(backend1, ackPort)), dialOrFail(netip.AddrPortFrom(vip, ackPort))}
	defer streams[0].Close()
	defer streams[1].Close()
	targets := [2]netip.Addr{backend1, vip}
	var bytes, conns [2]float64
	var streamTime, connTime [2]time.Duration
	// A slice ends when the backend acknowledged every MiB written in it,
	// so no data of one path is still in flight during the other's slice.
	buf := make([]byte, 1<<20)
	acks := make([]byte, 4096)
	round := 0
	for b.Loop() {
		// Which path goes first alternates too.
		order := [2]int{round % 2, 1 - round%2}
		round++
		for _, i := range order {
			start := time.Now()
			n := 0
			for time.Since(start) < slice {
				if _, err := streams[i].Write(buf); err != nil {
					b.Fatal(err)
				}
				n++
			}
			bytes[i] += float64(n * len(buf))
			for n > 0 {
				m, err := streams[i].Read(acks[:min(n, len(acks))])
				if err != nil {
					b.Fatal(err)
				}
				n -= m
			}
			streamTime[i] += time.Since(start)
		}
		for _, i := range order {
			to := netip.AddrPortFrom(targets[i], pingPort)
			start := time.Now()
			for time.Since(start) < slice {
				c := dialOrFail(to)
				var one [1]byte
				if _, err := c.Write(one[:]); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, one[:]); err != nil {
					b.Fatal(err)
				}
				c.Close()
				conns[i]++
			}
			connTime[i] += time.Since(start)
		}
	}
	mbps := func(i int) float64 { return bytes[i] / streamTime[i].Seconds() / 1e6 }
	cps := func(i int) float64 { return conns[i] / connTime[i].Seconds() }
	b.ReportMetric(mbps(0), "direct-MB/s")
	b.ReportMetric(mbps(1), "vip-MB/s")
	b.ReportMetric(mbps(1)/mbps(0), "throughput-ratio")
	b.ReportMetric(cps(0), "direct-conns/s")
	b.ReportMetric(cps(1), "vip-conns/s")
	b.ReportMetric(cps(1)/cps(0), "conns-ratio")
	if after, err := dp.objs.PodminVip.Stats(); err == nil && after.RunCount > before.RunCount {
		b.ReportMetric(float64(after.Runtime-before.Runtime)/float64(after.RunCount-before.RunCount), "prog-ns/run")
	}
}
