// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Interface is a network interface the program is attached to.
type Interface struct {
	Index int
	Name  string
}

// Routing tables that are not policy tables.
const (
	tableMain    = 254
	tableLocal   = 255
	tableDefault = 253
)

// route is the part of an IPv6 route discovery reads.
type route struct {
	dst      netip.Prefix
	table    uint32
	oif      int
	priority uint32
}

// routes dumps the IPv6 routes of every table in the calling thread's
// network namespace.
func routes() ([]route, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, syscall.AF_INET6)
	if err != nil {
		return nil, fmt.Errorf("dump IPv6 routes: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, fmt.Errorf("parse IPv6 routes: %w", err)
	}
	var out []route
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
			continue
		}
		rt := (*syscall.RtMsg)(unsafe.Pointer(&m.Data[0]))
		if rt.Family != syscall.AF_INET6 {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return nil, fmt.Errorf("parse IPv6 route: %w", err)
		}
		r := route{dst: netip.PrefixFrom(netip.IPv6Unspecified(), int(rt.Dst_len)), table: uint32(rt.Table)}
		for _, a := range attrs {
			switch a.Attr.Type {
			case syscall.RTA_DST:
				if ip, ok := netip.AddrFromSlice(a.Value); ok {
					r.dst = netip.PrefixFrom(ip, int(rt.Dst_len))
				}
			case syscall.RTA_OIF:
				if len(a.Value) >= 4 {
					r.oif = int(*(*int32)(unsafe.Pointer(&a.Value[0])))
				}
			case syscall.RTA_PRIORITY:
				if len(a.Value) >= 4 {
					r.priority = *(*uint32)(unsafe.Pointer(&a.Value[0]))
				}
			case unix.RTA_TABLE:
				if len(a.Value) >= 4 {
					r.table = *(*uint32)(unsafe.Pointer(&a.Value[0]))
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// discover returns the interfaces the program belongs on, in the calling
// thread's network namespace: host-side Pod veths (the interfaces of the
// main table's /128 routes inside podPrefix), the Pod ENI (podENI when
// named, otherwise the interfaces of default routes in policy tables,
// which is how delegated-prefix sources leave through it), the
// lowest-metric default-route interface of the main table, and the
// loopback device, where the ICMPv6 errors the node raises about packets
// it forwards for the program arrive (they are addressed to the node,
// the source the program gave those packets).
func discover(podPrefix netip.Prefix, podENI string) ([]Interface, error) {
	rs, err := routes()
	if err != nil {
		return nil, err
	}
	want := map[int]bool{}
	best, bestPrio := 0, uint32(0)
	for _, r := range rs {
		if r.oif == 0 {
			continue
		}
		switch {
		case r.table == tableMain && r.dst.Bits() == 128 && podPrefix.IsValid() && podPrefix.Contains(r.dst.Addr()):
			want[r.oif] = true
		case r.table == tableMain && r.dst.Bits() == 0:
			if best == 0 || r.priority < bestPrio {
				best, bestPrio = r.oif, r.priority
			}
		case r.dst.Bits() == 0 && podENI == "" && r.table != tableLocal && r.table != tableDefault:
			want[r.oif] = true
		}
	}
	if best != 0 {
		want[best] = true
	}
	if podENI != "" {
		ifc, err := net.InterfaceByName(podENI)
		if err != nil {
			return nil, fmt.Errorf("pod ENI %s: %w", podENI, err)
		}
		want[ifc.Index] = true
	}
	var out []Interface
	for idx := range want {
		ifc, err := net.InterfaceByIndex(idx)
		if err != nil || ifc.Flags&net.FlagLoopback != 0 {
			continue // gone since the dump, or routes through loopback
		}
		out = append(out, Interface{Index: ifc.Index, Name: ifc.Name})
	}
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifc := range ifcs {
		if ifc.Flags&net.FlagLoopback != 0 {
			out = append(out, Interface{Index: ifc.Index, Name: ifc.Name})
		}
	}
	slices.SortFunc(out, func(a, b Interface) int { return a.Index - b.Index })
	return out, nil
}

// inNetNS runs fn on an OS thread inside the network namespace at path
// (the caller's own when path is empty). The thread is discarded
// afterwards rather than switched back.
func inNetNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine, so no
		// other goroutine ever runs in the namespace.
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			errc <- fmt.Errorf("open network namespace: %w", err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

func sortInterfaces(ifcs []Interface) {
	slices.SortFunc(ifcs, func(a, b Interface) int { return a.Index - b.Index })
}
