// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package vip

import (
	"crypto/sha512"
	"net/netip"
)

// Prefix is the unique-local /64 every Service VIP lies in. Its second and
// third groups spell "Podmi" in ASCII (0x50 0x6f 0x64 0x6d 0x69).
var Prefix = netip.MustParsePrefix("fd50:6f64:6d69::/64")

// For returns the VIP of Service name in namespace of cluster: Prefix plus
// the first eight bytes of SHA-512(cluster NUL namespace NUL name). The NUL
// separators keep ("a", "bc") and ("ab", "c") apart.
func For(cluster, namespace, name string) netip.Addr {
	h := sha512.New()
	h.Write([]byte(cluster))
	h.Write([]byte{0})
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(name))
	var sum [sha512.Size]byte
	h.Sum(sum[:0])
	a := Prefix.Addr().As16()
	copy(a[8:], sum[:8])
	return netip.AddrFrom16(a)
}

// In reports whether a lies in Prefix, the range For draws from.
func In(a netip.Addr) bool { return Prefix.Contains(a) }
