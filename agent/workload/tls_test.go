// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/state"
)

// tlsFixture is a server Pod "db" (Service "database" in "product") and a
// client Pod "web" with identities written by a Manager.
type tlsFixture struct {
	server, client string // identity directories
	pool           *x509.CertPool
}

func newTLSFixture(t *testing.T) tlsFixture {
	t.Helper()
	ctx := context.Background()
	m := newManager(t, agentOpts{store: newBucket(t), key: newKey(t), clock: &clock{t: time.Now()}})
	mustRefresh(t, m)
	if _, err := m.EnsureAll(ctx, []Pod{{Name: "db", Namespace: "product", Service: "database"}, {Name: "web", Namespace: "product"}}); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.Bundle()) {
		t.Fatal("bundle does not parse")
	}
	return tlsFixture{server: filepath.Join(m.PodDir("db"), LinkName), client: filepath.Join(m.PodDir("web"), LinkName), pool: pool}
}

func loadPair(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// goServer serves mutual TLS 1.3 with the server Pod's files and reports
// each client's URI SAN (or handshake error).
func goServer(t *testing.T, f tlsFixture) (addr string, peers chan string) {
	t.Helper()
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{loadPair(t, f.server)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: f.pool,
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	peers = make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err != nil {
				peers <- "error: " + err.Error()
			} else {
				peers <- peerURI(tc.ConnectionState().PeerCertificates)
				_, _ = tc.Write([]byte("ok\n"))
			}
			tc.Close()
		}
	}()
	return ln.Addr().String(), peers
}

// peerURI is the URI SAN of the client's leaf, or a description of what
// is missing: a leaf without one must fail the test that sees it, not
// crash the test binary from the server goroutine.
func peerURI(chain []*x509.Certificate) string {
	switch {
	case len(chain) == 0:
		return "error: the client sent no certificate"
	case len(chain[0].URIs) != 1:
		return fmt.Sprintf("error: the client's leaf has %d URI SANs, want 1", len(chain[0].URIs))
	}
	return chain[0].URIs[0].String()
}

func TestGoTLSWorkloadIdentities(t *testing.T) {
	f := newTLSFixture(t)
	addr, peers := goServer(t, f)
	dial := func(serverName string, certs []tls.Certificate) error {
		c, err := tls.Dial("tcp", addr, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: f.pool, ServerName: serverName, Certificates: certs})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = bufio.NewReader(c).ReadString('\n')
		return err
	}
	for _, name := range []string{"database.product.svc.cluster.local", "database.product.svc", "database.product"} {
		if err := dial(name, []tls.Certificate{loadPair(t, f.client)}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p := <-peers; p != "spiffe://demo.podmin.internal/ns/product/pod/web" {
			t.Fatalf("server saw client %q", p)
		}
	}
	err := dial("database", []tls.Certificate{loadPair(t, f.client)})
	var hostErr x509.HostnameError
	if !errors.As(err, &hostErr) {
		t.Fatalf("bare Service name: %v, want a hostname verification error", err)
	}
	<-peers
	if err := dial("database.product.svc.cluster.local", nil); err == nil {
		t.Fatal("server accepted a client without a certificate")
	}
	if p := <-peers; !strings.HasPrefix(p, "error:") {
		t.Fatalf("server: %s", p)
	}
}

func needOpenSSL(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed (apt-get install -y openssl)")
	}
	return p
}

func TestOpenSSLVerify(t *testing.T) {
	openssl := needOpenSSL(t)
	f := newTLSFixture(t)
	for _, dir := range []string{f.server, f.client} {
		out, err := exec.Command(openssl, "verify", "-CAfile", filepath.Join(dir, CAFile), filepath.Join(dir, CertFile)).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": OK") {
			t.Fatalf("openssl verify: %v\n%s", err, out)
		}
		// The key is PKCS#8 that OpenSSL reads.
		out, err = exec.Command(openssl, "pkey", "-in", filepath.Join(dir, KeyFile), "-noout", "-text").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ED25519 Private-Key") {
			t.Fatalf("openssl pkey: %v\n%s", err, out)
		}
	}
}

// TestOpenSSLClientAgainstGoServer: openssl s_client authenticates with the
// workload leaf and verifies the service leaf by its DNS name; the bare
// Service name fails verification.
func TestOpenSSLClientAgainstGoServer(t *testing.T) {
	openssl := needOpenSSL(t)
	f := newTLSFixture(t)
	addr, peers := goServer(t, f)
	run := func(name string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, openssl, "s_client", "-connect", addr, "-tls1_3",
			"-CAfile", filepath.Join(f.client, CAFile), "-cert", filepath.Join(f.client, CertFile), "-key", filepath.Join(f.client, KeyFile),
			"-verify_hostname", name, "-verify_return_error", "-brief")
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("database.product.svc.cluster.local")
	if err != nil || !strings.Contains(out, "Verification: OK") {
		t.Fatalf("s_client: %v\n%s", err, out)
	}
	if p := <-peers; p != "spiffe://demo.podmin.internal/ns/product/pod/web" {
		t.Fatalf("Go server saw %q", p)
	}
	out, err = run("database")
	if err == nil || strings.Contains(out, "Verification: OK") {
		t.Fatalf("bare Service name verified:\n%s", out)
	}
}

// TestGoClientAgainstOpenSSLServer: openssl s_server serves the service
// leaf and requires a client certificate chained to ca.crt; a Go client
// with the workload leaf completes the exchange.
func TestGoClientAgainstOpenSSLServer(t *testing.T) {
	openssl := needOpenSSL(t)
	f := newTLSFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := exec.CommandContext(ctx, openssl, "s_server", "-accept", addr, "-tls1_3", "-rev",
		"-cert", filepath.Join(f.server, CertFile), "-key", filepath.Join(f.server, KeyFile),
		"-CAfile", filepath.Join(f.server, CAFile), "-Verify", "1", "-verify_return_error")
	var out strings.Builder
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = srv.Wait() }()
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: f.pool, ServerName: "database.product.svc.cluster.local", Certificates: []tls.Certificate{loadPair(t, f.client)}}
	var conn *tls.Conn
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err = tls.Dial("tcp", addr, cfg)
		if err == nil || time.Now().After(deadline) {
			break
		}
		var opErr *net.OpError
		if !errors.As(err, &opErr) {
			t.Fatalf("dial: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dial: %v\n%s", err, out.String())
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintln(conn, "podmin"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "nimdop" {
		t.Fatalf("s_server answered %q, %v\n%s", line, err, out.String())
	}
	if os.Getenv("PODMIN_TEST_VERBOSE") != "" {
		t.Log(out.String())
	}
}

// TestOpenSSLBundleWithExpiredRetired: after a recovery the bundle holds
// an expired retired certificate with the same subject and key, listed
// first. OpenSSL and Go must still choose the valid one.
func TestOpenSSLBundleWithExpiredRetired(t *testing.T) {
	openssl := needOpenSSL(t)
	ctx := context.Background()
	now := time.Now()
	key := newKey(t)
	store := newFakeStore()
	old, err := pki.NewCA(rnd{}, key, pki.WorkloadCASpec("demo"), now.Add(-pki.WorkloadCALifetime-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := pki.CAState{Active: old}.Marshal()
	if _, err := store.Put(ctx, state.IdentityCAPath, data); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentOpts{store: store, key: key, clock: &clock{t: now}})
	mustRefresh(t, m) // the leader recovers: new active, expired retired
	st := readState(t, store, key)
	if st.Retired == nil || !st.Retired.Equal(old) || st.Certs()[0] != st.Retired {
		t.Fatal("want the expired retired certificate first in the bundle")
	}
	if _, err := m.Ensure(ctx, Pod{Name: "db", Namespace: "product", Service: "database"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(m.PodDir("db"), LinkName)
	out, err := exec.Command(openssl, "verify", "-CAfile", filepath.Join(dir, CAFile), filepath.Join(dir, CertFile)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": OK") {
		t.Fatalf("openssl verify with an expired retired CA first: %v\n%s", err, out)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.Bundle())
	if _, err := currentLeaf(t, m, "db").Verify(x509.VerifyOptions{Roots: pool, DNSName: "database.product.svc"}); err != nil {
		t.Fatal(err)
	}
}
