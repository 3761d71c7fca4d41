// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"io"
	"net"
	"net/netip"
	"strconv"
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
	// The backend ignores resets in TIME_WAIT, which makes a NAT port
	// given to a new client too early a failed connect.
	run(b, "ip", "netns", "exec", tp.b1, "sysctl", "-qw", "net.ipv4.tcp_rfc1337=1")
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node)})
	if err != nil {
		b.Fatal(err)
	}
	renew(b, dp)
	b.Cleanup(func() { _ = dp.Stop() })
	svc := service(backend1)
	svc.Ports = append(svc.Ports, Port{Protocol: UDP, Port: udpSinkPort, TargetPort: udpSinkPort})
	if err := dp.Apply(b.Context(), []Service{svc}); err != nil {
		b.Fatal(err)
	}
	return tp, dp
}

// BenchmarkVIPInterleaved alternates the direct and the VIP path in short
// slices (one slice of each per measurement and iteration, the first path
// alternating), so that load from elsewhere on the machine hits both
// alike, and reports both rates and their ratio (VIP / direct) for bulk
// TCP, bulk UDP (what the backend received), connections the client
// closes first and connections the server closes first (which leave the
// backend in TIME_WAIT; failed ones are counted, with a 3 s timeout), and
// the program's cost per packet:
//
//	go test ./agent/dataplane -run '^$' -bench VIPInterleaved -benchtime 100x
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
	targets := [2]netip.Addr{backend1, vip}
	// Throughput: one long-lived connection and one UDP socket per path,
	// written in turns.
	streams := [2]net.Conn{dialOrFail(netip.AddrPortFrom(backend1, ackPort)), dialOrFail(netip.AddrPortFrom(vip, ackPort))}
	defer streams[0].Close()
	defer streams[1].Close()
	var datagrams [2]*net.UDPConn
	for i, a := range targets {
		tp.in(b, tp.client, func() (err error) {
			datagrams[i], err = net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, udpSinkPort)))
			return err
		})
		defer datagrams[i].Close()
	}
	var bytes, udpBytes, conns, closes, closeFailed [2]float64
	var streamTime, udpTime, connTime, closeTime [2]time.Duration
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
			got, took := udpSlice(b, datagrams[i], slice)
			udpBytes[i] += float64(got)
			udpTime[i] += took
		}
		for _, i := range order {
			to := netip.AddrPortFrom(targets[i], pingPort)
			tp.in(b, tp.client, func() error {
				start := time.Now()
				for time.Since(start) < slice {
					c, err := net.DialTimeout("tcp6", to.String(), 3*time.Second)
					if err != nil {
						return err
					}
					var one [1]byte
					if _, err := c.Write(one[:]); err != nil {
						return err
					}
					if _, err := io.ReadFull(c, one[:]); err != nil {
						return err
					}
					c.Close()
					conns[i]++
				}
				connTime[i] += time.Since(start)
				return nil
			})
		}
		for _, i := range order {
			to := netip.AddrPortFrom(targets[i], closerPort)
			tp.in(b, tp.client, func() error {
				start := time.Now()
				for time.Since(start) < slice {
					if err := shortConnection(to); err != nil {
						closeFailed[i]++
					}
					closes[i]++
				}
				closeTime[i] += time.Since(start)
				return nil
			})
		}
	}
	rate := func(v [2]float64, d [2]time.Duration, i int) float64 { return v[i] / d[i].Seconds() }
	report := func(name, unit string, v [2]float64, d [2]time.Duration, scale float64) {
		b.ReportMetric(rate(v, d, 0)/scale, "direct-"+unit)
		b.ReportMetric(rate(v, d, 1)/scale, "vip-"+unit)
		b.ReportMetric(rate(v, d, 1)/rate(v, d, 0), name+"-ratio")
	}
	report("tcp", "tcp-MB/s", bytes, streamTime, 1e6)
	report("udp", "udp-MB/s", udpBytes, udpTime, 1e6)
	report("conns", "conns/s", conns, connTime, 1)
	report("server-closes", "server-closes/s", closes, closeTime, 1)
	b.ReportMetric(closes[1], "vip-server-closes")
	b.ReportMetric(closeFailed[0], "direct-server-closes-failed")
	b.ReportMetric(closeFailed[1], "vip-server-closes-failed")
	if after, err := dp.objs.PodminVip.Stats(); err == nil && after.RunCount > before.RunCount {
		b.ReportMetric(float64(after.Runtime-before.Runtime)/float64(after.RunCount-before.RunCount), "prog-ns/run")
	}
	if s, err := dp.Stats(); err == nil && (s.Drops[DropNATExhausted] > 0 || s.Drops[DropNoFlow] > 0) {
		b.Logf("dataplane drops: %d without a free NAT port, %d without a flow", s.Drops[DropNATExhausted], s.Drops[DropNoFlow])
	}
}

// udpSlice sends 1400-byte datagrams on c for d and returns how many
// bytes the sink received meanwhile and how long it took, asking the sink
// for its count before and after.
func udpSlice(b *testing.B, c *net.UDPConn, d time.Duration) (int, time.Duration) {
	before := udpSinkCount(b, c)
	payload := make([]byte, 1400)
	start := time.Now()
	for time.Since(start) < d {
		if _, err := c.Write(payload); err != nil {
			b.Fatal(err)
		}
	}
	after := udpSinkCount(b, c)
	return after - before, time.Since(start)
}

// udpSinkCount asks the UDP sink behind c for the bytes it received,
// asking again when a question or answer is lost.
func udpSinkCount(b *testing.B, c *net.UDPConn) int {
	buf := make([]byte, 64)
	for range 10 {
		if _, err := c.Write([]byte("?")); err != nil {
			b.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			b.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil {
			continue
		}
		v, err := strconv.Atoi(string(buf[:n]))
		if err != nil {
			b.Fatalf("the UDP sink answered %q", buf[:n])
		}
		return v
	}
	b.Fatal("the UDP sink did not answer")
	return 0
}
