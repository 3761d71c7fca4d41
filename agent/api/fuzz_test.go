// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package api_test

import (
	"net/netip"
	"testing"

	"podmin.dev/podmin/agent/api"
)

// FuzzParsePodPrefix checks that every accepted Pod prefix is a canonical
// global-unicast IPv6 /80 that prints as it was sent.
func FuzzParsePodPrefix(f *testing.F) {
	for _, s := range []string{"2001:db8:2:0:7::/80", "2001:db8::/64", "fe80::/80", "::ffff:10.0.0.0/80", "2001:db8::1/80", "2001:DB8::/80", "1.2.3.0/24", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := api.ParsePodPrefix(s)
		if err != nil {
			return
		}
		if p.Bits() != api.PrefixBits || !p.Addr().Is6() || p.Addr().Is4In6() || !p.Addr().IsGlobalUnicast() || p.Masked() != p || p.String() != s {
			t.Fatalf("accepted %q as %s", s, p)
		}
		if q, err := netip.ParsePrefix(s); err != nil || q != p {
			t.Fatalf("%q: %v, %v", s, q, err)
		}
	})
}
