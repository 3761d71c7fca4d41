// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package identity

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
)

// RenewBefore is how long before expiry the node leaf is replaced: a third
// of its lifetime, so a renewal failure has hours of retries left.
const RenewBefore = 8 * time.Hour

// SecretReader reads one secret; every secrets provider satisfies it.
type SecretReader interface {
	Read(ctx context.Context, name secrets.Name) (secrets.Value, error)
}

// ReadClusterCA reads and checks the cluster CA from its secrets provider.
func ReadClusterCA(ctx context.Context, r SecretReader, cluster string) (pki.ClusterCA, error) {
	name, err := secrets.InternalSecret(cluster, secrets.ClusterCA)
	if err != nil {
		return pki.ClusterCA{}, err
	}
	v, err := r.Read(ctx, name)
	if err != nil {
		return pki.ClusterCA{}, fmt.Errorf("read the cluster CA %s: %w: run podmin setup to create it", name, err)
	}
	ca, err := pki.ParseClusterCA(v, cluster)
	if err != nil {
		return pki.ClusterCA{}, fmt.Errorf("cluster CA %s: %w", name, err)
	}
	return ca, nil
}

// Options configure a node identity.
type Options struct {
	// CA is the cluster CA (ReadClusterCA).
	CA pki.ClusterCA
	// Cluster, NodeGroup and NodeID are bound into the SPIFFE URI.
	Cluster, NodeGroup, NodeID string
	// Addr is the node's global IPv6 address, the only IP SAN.
	Addr netip.Addr
	// Now is the clock, also used to verify peers; nil means time.Now.
	Now func() time.Time
	// Random is the randomness for keys; nil means crypto/rand.
	Random io.Reader
	// Log receives renewals; nil discards them.
	Log *slog.Logger
}

// Peer is an authenticated node.
type Peer struct {
	NodeGroup, NodeID string
	Addr              netip.Addr
}

// Identity holds the node's current leaf and renews it on use.
type Identity struct {
	opts Options
	log  *slog.Logger
	pool *x509.CertPool
	mu   sync.Mutex
	cert *tls.Certificate
}

// New checks the options and issues the first leaf.
func New(opts Options) (*Identity, error) {
	if err := ids.ValidateCluster(opts.Cluster); err != nil {
		return nil, fmt.Errorf("node identity: %w", err)
	}
	if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
		return nil, fmt.Errorf("node identity: %w", err)
	}
	switch {
	case opts.NodeID == "" || !validNodeID(opts.NodeID):
		return nil, fmt.Errorf("node identity: node ID %q is not a path segment of letters, digits, '-', '_' or '.'", opts.NodeID)
	case !opts.Addr.Is6() || opts.Addr.Is4In6() || !opts.Addr.IsGlobalUnicast() || opts.Addr.Zone() != "":
		return nil, fmt.Errorf("node identity: %s is not a global IPv6 address: pass the node's address", opts.Addr)
	case opts.CA.Cert == nil || len(opts.CA.Key) != ed25519.PrivateKeySize:
		return nil, errors.New("node identity: no cluster CA: read it with ReadClusterCA")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Random == nil {
		opts.Random = rand.Reader
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool := x509.NewCertPool()
	pool.AddCert(opts.CA.Cert)
	id := &Identity{opts: opts, log: log, pool: pool}
	if _, err := id.Certificate(); err != nil {
		return nil, err
	}
	return id, nil
}

func validNodeID(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return s != "." && s != ".."
}

// Certificate returns the current leaf, issuing a new one when none exists
// or the current one expires within RenewBefore.
func (i *Identity) Certificate() (*tls.Certificate, error) {
	now := i.opts.Now()
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cert != nil && now.Before(i.cert.Leaf.NotAfter.Add(-RenewBefore)) {
		return i.cert, nil
	}
	key, err := pki.GenerateKey(i.opts.Random)
	if err != nil {
		return nil, err
	}
	spec := pki.NodeLeaf(i.opts.Cluster, i.opts.NodeGroup, i.opts.NodeID, i.opts.Addr)
	leaf, err := pki.Issue(i.opts.Random, i.opts.CA.Cert, i.opts.CA.Key, key.Public().(ed25519.PublicKey), spec, now)
	if err != nil {
		if i.cert != nil && now.Before(i.cert.Leaf.NotAfter) {
			i.log.Warn("node identity renewal failed: keeping the current leaf", "err", err)
			return i.cert, nil
		}
		return nil, fmt.Errorf("issue the node identity: %w", err)
	}
	i.cert = &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	i.log.Info("node identity issued", "notAfter", leaf.NotAfter, "uri", leaf.URIs[0].String())
	return i.cert, nil
}

// ServerConfig is the coordination server's TLS 1.3 configuration: it
// presents the node leaf and requires a client leaf of this cluster.
func (i *Identity) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		MaxVersion: tls.VersionTLS13,
		Time:       i.opts.Now,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return i.Certificate()
		},
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  i.pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := i.Peer(cs)
			return err
		},
	}
}

// ClientConfig is the TLS 1.3 configuration for dialing the node at peer:
// the server's leaf must name peer as its IP SAN and be a node of this
// cluster.
func (i *Identity) ClientConfig(peer netip.Addr) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		MaxVersion: tls.VersionTLS13,
		Time:       i.opts.Now,
		RootCAs:    i.pool,
		ServerName: peer.String(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return i.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			p, err := i.Peer(cs)
			if err == nil && p.Addr != peer {
				err = fmt.Errorf("node identity: %s presented the identity of %s", peer, p.Addr)
			}
			return err
		},
	}
}

// Peer returns the node authenticated by a verified connection: exactly
// one SPIFFE URI of this cluster and exactly one global IPv6 IP SAN.
func (i *Identity) Peer(cs tls.ConnectionState) (Peer, error) {
	if len(cs.PeerCertificates) == 0 {
		return Peer{}, errors.New("node identity: the peer presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	if len(leaf.URIs) != 1 {
		return Peer{}, fmt.Errorf("node identity: the peer's certificate has %d URI names, want 1", len(leaf.URIs))
	}
	ng, id, err := pki.ParseNodeURI(leaf.URIs[0], i.opts.Cluster)
	if err != nil {
		return Peer{}, fmt.Errorf("node identity: %w", err)
	}
	if len(leaf.IPAddresses) != 1 {
		return Peer{}, fmt.Errorf("node identity: the peer's certificate has %d IP addresses, want 1", len(leaf.IPAddresses))
	}
	addr, ok := netip.AddrFromSlice(leaf.IPAddresses[0])
	if !ok || !addr.Is6() || addr.Is4In6() || !addr.IsGlobalUnicast() {
		return Peer{}, fmt.Errorf("node identity: the peer's address %s is not a global IPv6 address", leaf.IPAddresses[0])
	}
	return Peer{NodeGroup: ng, NodeID: id, Addr: addr}, nil
}
