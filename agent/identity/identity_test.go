// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package identity

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/pki"
)

var t0 = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func clusterCA(t testing.TB, cluster string) pki.ClusterCA {
	t.Helper()
	v, err := pki.GenerateClusterCA(rand.Reader, cluster, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseClusterCA(v, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func node(t testing.TB, ca pki.ClusterCA, cluster, id, addr string, clk *clock) *Identity {
	t.Helper()
	n, err := New(Options{CA: ca, Cluster: cluster, NodeGroup: "workers", NodeID: id, Addr: netip.MustParseAddr(addr), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// serve accepts mTLS connections and reports each authenticated peer (or
// the handshake error).
func serve(t testing.TB, srv *Identity) (string, chan string) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	peers := make(chan string, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := c.(*tls.Conn)
				defer tc.Close()
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err != nil {
					peers <- "error: " + err.Error()
					return
				}
				p, err := srv.Peer(tc.ConnectionState())
				if err != nil {
					peers <- "error: " + err.Error()
					return
				}
				peers <- fmt.Sprintf("%s/%s@%s tls%x", p.NodeGroup, p.NodeID, p.Addr, tc.ConnectionState().Version)
				_, _ = io.WriteString(tc, "ok\n")
			}()
		}
	}()
	return ln.Addr().String(), peers
}

func dial(addr string, cfg *tls.Config) error {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

const (
	addrA = "2600:1f14:abc:de00::a"
	addrB = "2600:1f14:abc:de00::b"
)

func TestMutualTLS13(t *testing.T) {
	clk := &clock{t: t0}
	ca := clusterCA(t, "demo")
	a := node(t, ca, "demo", "i-aaaa", addrA, clk)
	b := node(t, ca, "demo", "i-bbbb", addrB, clk)
	addr, peers := serve(t, a)
	if err := dial(addr, b.ClientConfig(netip.MustParseAddr(addrA))); err != nil {
		t.Fatal(err)
	}
	if p := <-peers; p != "workers/i-bbbb@"+addrB+" tls304" {
		t.Fatalf("server saw %q", p)
	}
	leaf := a.cert.Leaf
	if len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != addrA || leaf.URIs[0].String() != "spiffe://demo.podmin.internal/nodegroup/workers/node/i-aaaa" {
		t.Fatalf("leaf names %v %v", leaf.IPAddresses, leaf.URIs)
	}
	if _, ok := a.cert.PrivateKey.(ed25519.PrivateKey); !ok {
		t.Fatal("no private key in memory")
	}
	// Dialing a node by the wrong address fails: the IP SAN is checked.
	if err := dial(addr, b.ClientConfig(netip.MustParseAddr(addrB))); err == nil || !strings.Contains(err.Error(), "certificate is valid for "+addrA) {
		t.Fatalf("wrong peer address: %v", err)
	}
	<-peers
}

func TestRefusals(t *testing.T) {
	clk := &clock{t: t0}
	ca := clusterCA(t, "demo")
	a := node(t, ca, "demo", "i-aaaa", addrA, clk)
	addr, peers := serve(t, a)
	peerA := netip.MustParseAddr(addrA)
	expectRefused := func(name string, cfg *tls.Config) {
		t.Helper()
		err := dial(addr, cfg)
		p := <-peers
		if err == nil || !strings.HasPrefix(p, "error:") {
			t.Errorf("%s: client %v, server %q: want refused", name, err, p)
		}
	}
	// Another cluster's CA.
	other := node(t, clusterCA(t, "demo"), "demo", "i-evil", addrB, clk)
	expectRefused("foreign CA", other.ClientConfig(peerA))
	// The same CA key material but another cluster's trust domain.
	wrongDomain := node(t, ca, "prod", "i-evil", addrB, clk)
	cfg := wrongDomain.ClientConfig(peerA)
	cfg.VerifyConnection = nil
	expectRefused("other trust domain", cfg)
	// No client certificate.
	expectRefused("no client certificate", &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: a.pool, ServerName: addrA})
	// TLS 1.2 only.
	b := node(t, ca, "demo", "i-bbbb", addrB, clk)
	cfg = b.ClientConfig(peerA)
	cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	expectRefused("TLS 1.2", cfg)
}

// TestRenewal: the leaf is renewed in memory before expiry; peers keep
// authenticating across the renewal, and an expired leaf fails.
func TestRenewal(t *testing.T) {
	clk := &clock{t: t0}
	ca := clusterCA(t, "demo")
	a := node(t, ca, "demo", "i-aaaa", addrA, clk)
	b := node(t, ca, "demo", "i-bbbb", addrB, clk)
	first, _ := a.Certificate()
	if got := first.Leaf.NotAfter.Sub(t0); got != pki.NodeLeafLifetime {
		t.Fatalf("lifetime %s", got)
	}
	clk.Add(pki.NodeLeafLifetime - RenewBefore - time.Second)
	if c, _ := a.Certificate(); c != first {
		t.Fatal("renewed too early")
	}
	clk.Add(time.Second)
	second, _ := a.Certificate()
	if second == first || !second.Leaf.NotAfter.Equal(clk.Now().Add(pki.NodeLeafLifetime)) {
		t.Fatal("not renewed within RenewBefore of expiry")
	}
	addr, peers := serve(t, a)
	if err := dial(addr, b.ClientConfig(netip.MustParseAddr(addrA))); err != nil {
		t.Fatal(err)
	}
	<-peers
	// A stale peer leaf (b kept one past its expiry) is refused.
	stale := b.ClientConfig(netip.MustParseAddr(addrA))
	old, _ := b.Certificate()
	clk.Add(pki.NodeLeafLifetime + time.Second)
	stale.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return old, nil }
	if err := dial(addr, stale); err == nil {
		t.Fatal("expired client leaf accepted")
	}
	<-peers
}

func TestConcurrentHandshakes(t *testing.T) {
	clk := &clock{t: t0}
	ca := clusterCA(t, "demo")
	a := node(t, ca, "demo", "i-aaaa", addrA, clk)
	b := node(t, ca, "demo", "i-bbbb", addrB, clk)
	addr, peers := serve(t, a)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 4 {
				if err := dial(addr, b.ClientConfig(netip.MustParseAddr(addrA))); err != nil {
					t.Error(err)
				}
				<-peers
			}
		})
	}
	wg.Go(func() {
		for range 16 {
			clk.Add(time.Hour)
			if _, err := a.Certificate(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
}

func TestNewRejectsBadOptions(t *testing.T) {
	ca := clusterCA(t, "demo")
	for name, o := range map[string]Options{
		"ipv4":      {CA: ca, Cluster: "demo", NodeGroup: "workers", NodeID: "i-1", Addr: netip.MustParseAddr("10.0.0.1")},
		"link":      {CA: ca, Cluster: "demo", NodeGroup: "workers", NodeID: "i-1", Addr: netip.MustParseAddr("fe80::1")},
		"no CA":     {Cluster: "demo", NodeGroup: "workers", NodeID: "i-1", Addr: netip.MustParseAddr(addrA)},
		"node path": {CA: ca, Cluster: "demo", NodeGroup: "workers", NodeID: "a/b", Addr: netip.MustParseAddr(addrA)},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func BenchmarkNodeLeaf(b *testing.B) {
	clk := &clock{t: t0}
	a := node(b, clusterCA(b, "demo"), "demo", "i-aaaa", addrA, clk)
	for b.Loop() {
		clk.Add(pki.NodeLeafLifetime)
		if _, err := a.Certificate(); err != nil {
			b.Fatal(err)
		}
	}
}
