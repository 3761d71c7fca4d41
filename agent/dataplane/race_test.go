// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"podmin.dev/podmin/bpf"
)

// synFrame is an Ethernet frame with an IPv6 TCP SYN carrying the
// options Linux sends (MSS, SACK permitted, timestamps, window scale);
// its checksum is not computed: the program only adjusts it.
func synFrame(src, dst netip.Addr, sport, dport uint16, seq uint32) []byte {
	opts := []byte{2, 4, 0x05, 0xa0, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7}
	p := make([]byte, 14+40+20+len(opts))
	binary.BigEndian.PutUint16(p[12:], 0x86dd)
	ip := p[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(20+len(opts)))
	ip[6], ip[7] = uint8(TCP), 64
	s, d := src.As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	tcp := ip[40:]
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12], tcp[13] = byte(20+len(opts))/4<<4, 0x02
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	copy(tcp[20:], opts)
	return p
}

// onCPU pins the calling goroutine's thread to cpu; the thread must be
// one that is never handed back (inNetNS's, or one locked for good).
func onCPU(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}

// TestRewriteRaceKeepsServicesApart has one CPU rewrite two Service keys
// of one VIP (ports 80 and 81, to backend ports 8080 and 8081) with the
// agent's own map writes, over and over, as an Apply that changes both
// does once, while the other runs new connections to port 80 through the
// program: none may go to port 81's backend port 8081. Written as a plain update, each rewrite lands in a
// fresh element and the replaced one is reused by the next write, of the
// other key, while the program may still be reading it.
func TestRewriteRaceKeepsServicesApart(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the race needs two CPUs at once; this machine has one")
	}
	f := newFixture(t, "W")
	svc := Service{Namespace: "product", Name: "frontend", VIP: vip, Backends: []netip.Addr{backend1},
		Ports: []Port{{Protocol: TCP, Port: 80, TargetPort: 8080}, {Protocol: TCP, Port: 81, TargetPort: 8081}}}
	f.apply(t, svc)
	var rewrites []update
	for k, v := range f.dp.current.services {
		rewrites = append(rewrites, update{mapServices, k, v})
	}

	const syns = 200000
	var done atomic.Bool
	var wg sync.WaitGroup
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		if writeErr = onCPU(1); writeErr != nil {
			return
		}
		for !done.Load() {
			for _, u := range rewrites {
				if writeErr = f.dp.write(u); writeErr != nil {
					return
				}
			}
		}
	}()
	wrong, passed := 0, 0
	err := inNetNS(f.nsPath(f.node), func() error {
		defer done.Store(true)
		if err := onCPU(0); err != nil {
			return err
		}
		out := make([]byte, 14+40+40+64)
		fk := bpf.VipFlowKey{Src: addr(clientIP), Dst: addr(vip), Sport: port(40000), Dport: port(80), Proto: uint8(TCP)}
		for i := range syns {
			// One client tuple whose forward entry is gone each time, as
			// if evicted: every SYN picks its backend afresh.
			if err := f.dp.objs.ForwardFlows.Delete(fk); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
			opts := &ebpf.RunOptions{Data: synFrame(clientIP, vip, 40000, 80, uint32(i)*4096), DataOut: out}
			ret, err := f.dp.objs.PodminVip.Run(opts)
			if err != nil {
				return err
			}
			if ret != 0 {
				continue
			}
			passed++
			if got := binary.BigEndian.Uint16(opts.DataOut[14+40+2:]); got != 8080 {
				wrong++
			}
		}
		return nil
	})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	if passed < syns/2 {
		t.Fatalf("only %d of %d SYNs were forwarded; drops %v", passed, syns, f.stats(t).Drops)
	}
	if wrong > 0 {
		t.Fatalf("%d of %d new connections to port 80 went to another Service key's backend port while the keys were rewritten", wrong, passed)
	}
}
