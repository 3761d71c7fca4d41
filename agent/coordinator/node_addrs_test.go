// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// Local node mode serves the coordination API on loopback by default,
// where a peer is found by its port; given a non-loopback address it
// serves there, is known by its node address and dials peers at their
// advertised addresses (no loopback mapping), so local nodes in network
// namespaces of their own coordinate as cloud nodes do.
func TestLocalNodeAPIAddresses(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	lis, adv, id, dial, err := listenAPI(NodeOptions{Local: true, Settings: Settings{APIAddr: "[::1]:0"}})
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	if !netip.MustParsePrefix("2001:db8::/32").Contains(adv.Addr()) || adv.Port() != port || id != "local-"+strconv.Itoa(int(port)) || dial == nil {
		t.Fatalf("loopback: advertise %s, id %s, dial set %v", adv, id, dial != nil)
	}
	// The loopback dial reaches this listener by the identity address.
	accepted := make(chan struct{})
	go func() {
		if c, err := lis.Accept(); err == nil {
			c.Close()
			close(accepted)
		}
	}()
	c, err := dial(context.Background(), adv.String())
	if err != nil {
		t.Fatalf("loopback dial of %s: %v", adv, err)
	}
	c.Close()
	<-accepted
	lis.Close()

	node := netip.MustParseAddr("2001:db8:0:e2e::11")
	lis, adv, id, dial, err = listenAPI(NodeOptions{Local: true, Settings: Settings{APIAddr: "[::]:0", NodeAddr: node}})
	if err != nil {
		t.Fatalf("a non-loopback API address in local node mode: %v", err)
	}
	defer lis.Close()
	bound := lis.Addr().(*net.TCPAddr)
	if !bound.IP.IsUnspecified() {
		t.Errorf("listening on %s, want the given [::]", bound)
	}
	if adv != netip.AddrPortFrom(node, uint16(bound.Port)) || dial != nil {
		t.Errorf("advertise %s (want [%s]:%d), dial through loopback %v (want peers dialed at their addresses)", adv, node, bound.Port, dial != nil)
	}
	if want := "local-2001-db8-0-e2e--11-" + strconv.Itoa(bound.Port); id != want {
		t.Errorf("node ID %q, want %q: nodes sharing a port differ by address", id, want)
	}

	// A wildcard listen address names no address peers could reach.
	if _, _, _, _, err := listenAPI(NodeOptions{Local: true, Settings: Settings{APIAddr: "[::]:0"}}); err == nil || !strings.Contains(err.Error(), EnvNodeAddr) {
		t.Errorf("[::] without a node address: %v, want an error naming %s", err, EnvNodeAddr)
	}
}
