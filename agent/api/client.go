// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/identity"
)

// ClientIdentity is what dialing needs from the node identity;
// *identity.Identity is one.
type ClientIdentity interface {
	ClientConfig(peer netip.Addr) *tls.Config
	Peer(cs tls.ConnectionState) (identity.Peer, error)
}

// DialFunc opens the connection to addr (host:port). Nil dials TCP; local
// node mode maps identity addresses to loopback ports.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// Client is a connection to one node's coordination API.
type Client struct {
	pb.CoordinationClient
	conn *grpc.ClientConn
}

// Dial connects to the node at addr ("[ipv6]:port"), which must present
// the identity of that address and, when nodeID is set, of that node.
func Dial(addr, nodeID string, id ClientIdentity, dial DialFunc) (*Client, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("coordination address %q: %w", addr, err)
	}
	cfg := id.ClientConfig(ap.Addr())
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		p, err := id.Peer(cs)
		if err != nil {
			return err
		}
		if nodeID != "" && p.NodeID != nodeID {
			return fmt.Errorf("coordination: %s presented node %s, want %s", addr, p.NodeID, nodeID)
		}
		return nil
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
	if dial != nil {
		opts = append(opts, grpc.WithContextDialer(dial))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("coordination client for %s: %w", addr, err)
	}
	return &Client{CoordinationClient: pb.NewCoordinationClient(conn), conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// LoopbackDial is local node mode's DialFunc. Every agent on the machine
// listens on [::1] at its own port and keeps a documentation-range
// identity address (2001:db8::/32) as its IP SAN, so the port of addr
// selects the agent while TLS still verifies the identity address.
func LoopbackDial(ctx context.Context, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("coordination address %q: %w", addr, err)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", netip.AddrPortFrom(netip.IPv6Loopback(), ap.Port()).String())
}
