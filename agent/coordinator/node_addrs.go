// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"podmin.dev/podmin/agent/api"
)

// listenAPI listens for the coordination API and returns the
// address and node ID the node's identity binds, and how peers are dialed
// (nil: at their advertised addresses). In local node mode every agent
// listens on its own loopback port by default and keeps a
// documentation-range identity address derived from it, which
// api.LoopbackDial maps back; given a non-loopback EnvAPIAddr (local
// nodes with networks of their own, e.g. one network namespace each) it
// listens there, advertises its node address and dials peers at theirs,
// as a cloud node does.
func listenAPI(opts NodeOptions) (net.Listener, netip.AddrPort, string, api.DialFunc, error) {
	if opts.Local {
		addr := opts.APIAddr
		if addr == "" {
			addr = netip.AddrPortFrom(netip.IPv6Loopback(), api.Port).String()
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return nil, netip.AddrPort{}, "", nil, fmt.Errorf("%s=%q is not an address and port such as [::1]:18081", EnvAPIAddr, addr)
		}
		if !ap.Addr().IsLoopback() {
			return localNetworkAddrs(ap, opts)
		}
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, netip.AddrPort{}, "", nil, fmt.Errorf("coordination API: %w: give each local agent its own %s", err, EnvAPIAddr)
		}
		port := uint16(lis.Addr().(*net.TCPAddr).Port)
		node := opts.NodeAddr
		if !node.IsValid() {
			node = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(port >> 8), 15: byte(port)})
		}
		id := opts.NodeID
		if id == "" {
			id = "local-" + strconv.Itoa(int(port))
		}
		return lis, netip.AddrPortFrom(node, port), id, api.LoopbackDial, nil
	}
	node := opts.NodeAddr
	if !node.IsValid() {
		var err error
		if node, err = discoverNodeAddr(opts.PodPrefix); err != nil {
			return nil, netip.AddrPort{}, "", nil, err
		}
	}
	advertise := netip.AddrPortFrom(node, api.Port)
	listen := advertise.String()
	if opts.APIAddr != "" {
		listen = opts.APIAddr
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, netip.AddrPort{}, "", nil, fmt.Errorf("coordination API: %w", err)
	}
	id := opts.NodeID
	if id == "" {
		h, err := os.Hostname()
		if err != nil {
			_ = lis.Close()
			return nil, netip.AddrPort{}, "", nil, fmt.Errorf("node ID: %w: set %s", err, EnvNodeID)
		}
		id = h
	}
	return lis, advertise, id, nil, nil
}

// localNetworkAddrs is local node mode on a network: the API listens at
// listen, a non-loopback address, and the node is known to its peers by
// its node address (EnvNodeAddr, else the listen address) at the bound
// port. Peers are dialed directly, so every local agent of the cluster
// must run this way.
func localNetworkAddrs(listen netip.AddrPort, opts NodeOptions) (net.Listener, netip.AddrPort, string, api.DialFunc, error) {
	node := opts.NodeAddr
	if !node.IsValid() {
		node = listen.Addr()
		if a := node; !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || a.IsPrivate() || a.Zone() != "" {
			return nil, netip.AddrPort{}, "", nil, fmt.Errorf("%s=%s: a local node serving the coordination API beyond loopback is known to its peers by a global IPv6 address: "+
				"listen on one, or set %s to the address its peers reach it at", EnvAPIAddr, listen, EnvNodeAddr)
		}
	}
	lis, err := net.Listen("tcp", listen.String())
	if err != nil {
		return nil, netip.AddrPort{}, "", nil, fmt.Errorf("coordination API: %w: listen on an address of this node's network, or unset %s to serve on loopback", err, EnvAPIAddr)
	}
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	id := opts.NodeID
	if id == "" {
		// Local agents on their own networks may share a port, never an
		// address: the default ID names both.
		id = "local-" + strings.ReplaceAll(node.String(), ":", "-") + "-" + strconv.Itoa(int(port))
	}
	return lis, netip.AddrPortFrom(node, port), id, nil, nil
}

// discoverNodeAddr returns the node's global IPv6 address: the first
// global unicast, non-ULA address outside the Pod prefix on an up,
// non-loopback interface, in interface order (the primary ENI first).
func discoverNodeAddr(podPrefix netip.Prefix) (netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("find the node IPv6 address: %w: set %s", err, EnvNodeAddr)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok || !ip.Is6() || ip.Is4In6() || !ip.IsGlobalUnicast() || ip.IsPrivate() || podPrefix.Contains(ip) {
				continue
			}
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("the node has no global IPv6 address outside its Pod prefix %s: set %s", podPrefix, EnvNodeAddr)
}
