// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"podmin.dev/podmin/bpf"
)

// reservedPortsPath lists ports the kernel never picks as ephemeral
// ports (for IPv4 and IPv6 alike), per network namespace.
const reservedPortsPath = "/proc/sys/net/ipv4/ip_local_reserved_ports"

// reserveNATPorts makes sure the calling thread's network namespace
// reserves the source-NAT range, so no local socket is ever given a port
// that a backend's reply to a NATed flow could also be addressed to.
// Ranges already reserved are kept.
func reserveNATPorts() error {
	cur, err := os.ReadFile(reservedPortsPath)
	if err != nil {
		return fmt.Errorf("read reserved ports: %w", err)
	}
	if covers(strings.TrimSpace(string(cur)), bpf.NATPortMin, bpf.NATPortMax) {
		return nil
	}
	v := fmt.Sprintf("%d-%d", bpf.NATPortMin, bpf.NATPortMax)
	if s := strings.TrimSpace(string(cur)); s != "" {
		v = s + "," + v
	}
	if err := os.WriteFile(reservedPortsPath, []byte(v), 0o644); err != nil {
		return fmt.Errorf("reserve the source-NAT ports %d-%d: %w", bpf.NATPortMin, bpf.NATPortMax, err)
	}
	return nil
}

// covers reports whether the kernel's list ("1,5-9,...") reserves every
// port from lo to hi. The kernel prints merged ranges, so one entry must
// hold them all.
func covers(list string, lo, hi int) bool {
	for part := range strings.SplitSeq(list, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(part), "-")
		if !ok {
			b = a
		}
		from, err1 := strconv.Atoi(a)
		to, err2 := strconv.Atoi(b)
		if err1 == nil && err2 == nil && from <= lo && to >= hi {
			return true
		}
	}
	return false
}
