// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// BenchmarkProgram measures the program's own cost per packet, as the
// kernel times one run of it on a packet, for the packets of an open flow
// (to the VIP and the reply) and for traffic it passes by:
//
//	go test ./bpf -run '^$' -bench Program
func BenchmarkProgram(b *testing.B) {
	objs := loaded(b)
	ifindex := device(b)
	// The kernel's own account of the program's run time.
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	// Open a TCP and a UDP flow.
	syn := tcpPacket(client, vip, 40000, 80, seg{flags: tcpSYN, seq: 1, tsval: 1}, nil)
	tcpOut := runBench(b, objs, syn, ifindex)
	udpIn := packet(protoUDP, client, vip, 40001, 53, make([]byte, 1200))
	udpOut := runBench(b, objs, udpIn, ifindex)
	tcpPort, udpPort := parse(tcpOut).sport, parse(udpOut).sport
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"TCP to the VIP", tcpPacket(client, vip, 40000, 80, seg{flags: tcpACK, seq: 2, ack: 2, tsval: 2}, make([]byte, 1200))},
		{"TCP reply", tcpPacket(backend, node, 8080, tcpPort, seg{flags: tcpACK, seq: 2, ack: 2, tsval: 2}, make([]byte, 1200))},
		{"UDP to the VIP", udpIn},
		{"UDP reply", packet(protoUDP, backend, node, 5353, udpPort, make([]byte, 1200))},
		{"other traffic", packet(protoTCP, client, backend, 40000, 8080, make([]byte, 1200))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			before, err := objs.PodminVip.Stats()
			if err != nil {
				b.Fatal(err)
			}
			out := make([]byte, len(tc.in)+64)
			for b.Loop() {
				opts := &ebpf.RunOptions{Data: tc.in, DataOut: out, Context: skbContext{IngressIfindex: ifindex, Ifindex: ifindex}}
				ret, err := objs.PodminVip.Run(opts)
				if err != nil || int32(ret) == tcxDrop {
					b.Fatalf("verdict %d, %v", int32(ret), err)
				}
			}
			after, err := objs.PodminVip.Stats()
			if err != nil {
				b.Fatal(err)
			}
			if after.RunCount == before.RunCount {
				b.Fatal("the kernel counted no runs")
			}
			b.ReportMetric(float64(after.Runtime-before.Runtime)/float64(after.RunCount-before.RunCount), "prog-ns/packet")
		})
	}
}

func runBench(b *testing.B, objs *VipObjects, in []byte, ifindex uint32) []byte {
	b.Helper()
	ret, out, err := run(b, objs, in, ifindex, false)
	if err != nil || ret != tcxPass {
		b.Fatalf("verdict %d, %v", ret, err)
	}
	return out
}
