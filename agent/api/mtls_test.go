// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package api_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/internal/pki"
)

const cluster = "prod"

// fakeBackend records what the server lets through; its registrations
// are a plain map (conflicts are the coordinator's, tested there).
type fakeBackend struct {
	mu      sync.Mutex
	leading bool
	nodes   map[string]api.Node
	reports map[string][]api.Endpoint
	left    []string
	indexes []string
}

func (b *fakeBackend) Register(_ context.Context, n api.Node) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nodes == nil {
		b.nodes = map[string]api.Node{}
	}
	b.nodes[n.ID] = n
	return nil
}

func (b *fakeBackend) Registered(id string) (api.Node, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.nodes[id]
	return n, ok
}

func (b *fakeBackend) Leave(_ context.Context, n api.Node) (api.Position, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.nodes, n.ID)
	b.left = append(b.left, n.ID)
	return api.Position{Term: 1, Generation: 1, Revision: 2}, nil
}

func (b *fakeBackend) Leader() (api.Leader, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return api.Leader{ID: "n1", Addr: "[2001:db8::1]:8081"}, b.leading
}

func (b *fakeBackend) Report(_ context.Context, n api.Node, eps []api.Endpoint) (api.Position, []string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reports[n.ID] = eps
	return api.Position{Term: 1, Generation: 1, Revision: uint64(len(b.reports))}, nil, nil
}

func (b *fakeBackend) Snapshot(context.Context) (*pb.ServiceSnapshot, error) {
	return &pb.ServiceSnapshot{Generation: 1, Revision: 1, LeaderId: "n1"}, nil
}

func (b *fakeBackend) IndexChanged(etag string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.indexes = append(b.indexes, etag)
}

func (b *fakeBackend) calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reports) + len(b.indexes) + len(b.left)
}

func newCA(t *testing.T) pki.ClusterCA {
	t.Helper()
	v, err := pki.GenerateClusterCA(rand.Reader, cluster, time.Now().Add(-72*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseClusterCA(v, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func newNode(t *testing.T, ca pki.ClusterCA, id, addr string) *identity.Identity {
	t.Helper()
	n, err := identity.New(identity.Options{CA: ca, Cluster: cluster, NodeGroup: "workers", NodeID: id, Addr: netip.MustParseAddr(addr)})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// harness is the leader n1 serving on a real loopback socket; its identity
// address 2001:db8::1 is reached through a dialer, as in local node mode.
type harness struct {
	ca      pki.ClusterCA
	backend *fakeBackend
	server  *api.Server
	lis     net.Listener

	mu      sync.Mutex
	refused map[string]string // client leaf serial → why the identity check refused it
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{ca: newCA(t), backend: &fakeBackend{leading: true, reports: map[string][]api.Endpoint{}}}
	leader := newNode(t, h.ca, "n1", "2001:db8::1")
	h.refused = map[string]string{}
	cfg := leader.ServerConfig()
	check := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		err := check(cs)
		if err != nil {
			h.mu.Lock()
			h.refused[cs.PeerCertificates[0].SerialNumber.String()] = err.Error()
			h.mu.Unlock()
		}
		return err
	}
	h.server = api.NewServer(cfg, leader, h.backend, nil)
	var err error
	h.lis, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.server.Serve(h.lis)
	t.Cleanup(h.server.Stop)
	return h
}

func (h *harness) dial(ctx context.Context, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", h.lis.Addr().String())
}

// rawClient dials with a hand-made client certificate.
func (h *harness) rawClient(t *testing.T, cert tls.Certificate) pb.CoordinationClient {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(h.ca.Cert)
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "2001:db8::1", Certificates: []tls.Certificate{cert}}
	conn, err := grpc.NewClient("passthrough:///[2001:db8::1]:8081", grpc.WithTransportCredentials(credentials.NewTLS(cfg)), grpc.WithContextDialer(h.dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewCoordinationClient(conn)
}

// leaf issues a client certificate from caCert/caKey.
func leaf(t *testing.T, caCert *x509.Certificate, caKey ed25519.PrivateKey, spec pki.LeafSpec, now time.Time) tls.Certificate {
	t.Helper()
	key, err := pki.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.Issue(rand.Reader, caCert, caKey, key.Public().(ed25519.PublicKey), spec, now)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: key, Leaf: c}
}

func call(t *testing.T, c pb.CoordinationClient) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := c.Hello(ctx, &pb.HelloRequest{PodPrefix: "2001:db8:2:0:7::/80"})
	return err
}

func TestAuthorizedNodeReportsInsideItsPrefix(t *testing.T) {
	h := newHarness(t)
	follower := newNode(t, h.ca, "n2", "2001:db8::2")
	c, err := api.Dial("[2001:db8::1]:8081", "n1", follower, h.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	// No Hello yet: the leader does not know the node's prefix.
	_, err = c.ReportEndpoints(ctx, &pb.EndpointReport{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("report before Hello: %v, want FailedPrecondition", err)
	}
	hello, err := c.Hello(ctx, &pb.HelloRequest{PodPrefix: "2001:db8:2:0:7::/80"})
	if err != nil || !hello.Leader || hello.LeaderId != "n1" {
		t.Fatalf("Hello = %v, %v", hello, err)
	}
	rep := &pb.EndpointReport{Endpoints: []*pb.ReportedEndpoint{
		{Namespace: "product", Service: "web", Address: "2001:db8:2:0:7::a"},
		{Namespace: "product", Service: "web", Address: "2001:db8:2:0:7:ffff:ffff:ffff"},
	}}
	if _, err := c.ReportEndpoints(ctx, rep); err != nil {
		t.Fatal(err)
	}
	h.backend.mu.Lock()
	got := h.backend.reports["n2"]
	h.backend.mu.Unlock()
	if len(got) != 2 || got[0].Addr != netip.MustParseAddr("2001:db8:2:0:7::a") || got[0].Service != "web" {
		t.Fatalf("backend got %+v for n2", got)
	}
	if s, err := c.Snapshot(ctx, &pb.SnapshotRequest{}); err != nil || s.LeaderId != "n1" {
		t.Errorf("Snapshot = %v, %v", s, err)
	}
}

func TestEndpointsOutsideThePrefixAreRefused(t *testing.T) {
	h := newHarness(t)
	c, err := api.Dial("[2001:db8::1]:8081", "n1", newNode(t, h.ca, "n2", "2001:db8::2"), h.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	for _, p := range []string{"2001:db8:2:0:7::/64", "2001:db8:2:0:7::1/80", "fe80::/80", "2001:0db8:2:0:7::/80", "10.0.0.0/8"} {
		if _, err := c.Hello(ctx, &pb.HelloRequest{PodPrefix: p}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("Hello with prefix %s: %v, want InvalidArgument", p, err)
		}
	}
	if _, err := c.Hello(ctx, &pb.HelloRequest{PodPrefix: "2001:db8:2:0:7::/80"}); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"2001:db8:2:0:8::1", "2001:db8:3:0:7::1", "2001:db8::1"} {
		_, err := c.ReportEndpoints(ctx, &pb.EndpointReport{Endpoints: []*pb.ReportedEndpoint{
			{Namespace: "product", Service: "web", Address: "2001:db8:2:0:7::1"},
			{Namespace: "product", Service: "web", Address: addr},
		}})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "outside node n2's Pod prefix 2001:db8:2:0:7::/80") {
			t.Errorf("endpoint %s: %v, want PermissionDenied", addr, err)
		}
	}
	if n := h.backend.calls(); n != 0 {
		t.Errorf("the backend received %d calls from refused reports", n)
	}
}

func TestUnauthorizedCertificatesAreRefused(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	foreign := newCA(t) // same cluster name, another key
	// why is what the server's identity check says; empty when chain
	// verification refuses the certificate before it.
	why := map[string]string{
		"foreign CA": "", "expired": "",
		"wrong cluster in the SAN": "is not a node identity of cluster prod",
		"CN-only":                  "has 0 URI names, want 1",
		"workload identity":        "is not a node identity of cluster prod",
		"two URIs":                 "has 2 URI names, want 1",
	}
	cases := map[string]tls.Certificate{
		"foreign CA":               leaf(t, foreign.Cert, foreign.Key, pki.NodeLeaf(cluster, "workers", "n2", netip.MustParseAddr("2001:db8::2")), now),
		"wrong cluster in the SAN": leaf(t, h.ca.Cert, h.ca.Key, pki.NodeLeaf("staging", "workers", "n2", netip.MustParseAddr("2001:db8::2")), now),
		"CN-only": leaf(t, h.ca.Cert, h.ca.Key, pki.LeafSpec{CommonName: "n2", IPs: []net.IP{net.ParseIP("2001:db8::2")},
			ClientAuth: true, ServerAuth: true, Lifetime: time.Hour}, now),
		"expired":           leaf(t, h.ca.Cert, h.ca.Key, pki.NodeLeaf(cluster, "workers", "n2", netip.MustParseAddr("2001:db8::2")), now.Add(-2*pki.NodeLeafLifetime)),
		"workload identity": leaf(t, h.ca.Cert, h.ca.Key, pki.WorkloadLeaf(cluster, "product", "web-0", ""), now),
		"two URIs": leaf(t, h.ca.Cert, h.ca.Key, pki.LeafSpec{CommonName: "n2",
			URIs:       []*url.URL{pki.NodeURI(cluster, "workers", "n2"), pki.NodeURI(cluster, "workers", "n3")},
			IPs:        []net.IP{net.ParseIP("2001:db8::2")},
			ClientAuth: true, Lifetime: time.Hour}, now),
	}
	for name, cert := range cases {
		t.Run(name, func(t *testing.T) {
			err := call(t, h.rawClient(t, cert))
			if err == nil || status.Code(err) == codes.OK {
				t.Fatal("the call succeeded")
			}
			h.mu.Lock()
			got, checked := h.refused[cert.Leaf.SerialNumber.String()]
			h.mu.Unlock()
			if want := why[name]; want == "" && checked || want != "" && !strings.Contains(got, want) {
				t.Errorf("identity check said %q, want %q", got, want)
			}
		})
	}
	if n := h.backend.calls(); n != 0 {
		t.Errorf("the backend received %d calls", n)
	}
	// The control: a proper node leaf made the same way is accepted.
	good := leaf(t, h.ca.Cert, h.ca.Key, pki.NodeLeaf(cluster, "workers", "n2", netip.MustParseAddr("2001:db8::2")), now)
	if err := call(t, h.rawClient(t, good)); err != nil {
		t.Fatalf("a valid node leaf was refused: %v", err)
	}
}

// TestAuthorizationUsesTheURINotTheCN presents a valid leaf whose Common
// Name claims another node: the report is filed under the URI's node.
func TestAuthorizationUsesTheURINotTheCN(t *testing.T) {
	h := newHarness(t)
	spec := pki.NodeLeaf(cluster, "workers", "n2", netip.MustParseAddr("2001:db8::2"))
	spec.CommonName = "n1"
	c := h.rawClient(t, leaf(t, h.ca.Cert, h.ca.Key, spec, time.Now()))
	ctx := t.Context()
	if _, err := c.Hello(ctx, &pb.HelloRequest{PodPrefix: "2001:db8:2:0:7::/80"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReportEndpoints(ctx, &pb.EndpointReport{Endpoints: []*pb.ReportedEndpoint{{Namespace: "a", Service: "b", Address: "2001:db8:2:0:7::1"}}}); err != nil {
		t.Fatal(err)
	}
	h.backend.mu.Lock()
	defer h.backend.mu.Unlock()
	if _, ok := h.backend.reports["n2"]; !ok || len(h.backend.reports) != 1 {
		t.Errorf("reports filed under %v, want only n2", h.backend.reports)
	}
}

// TestClientRefusesAnotherNode dials the leader expecting a different node.
func TestClientRefusesAnotherNode(t *testing.T) {
	h := newHarness(t)
	follower := newNode(t, h.ca, "n2", "2001:db8::2")
	for name, target := range map[string][2]string{
		"another node ID": {"[2001:db8::1]:8081", "n7"},
		"another address": {"[2001:db8::9]:8081", "n1"},
	} {
		c, err := api.Dial(target[0], target[1], follower, h.dial)
		if err != nil {
			t.Fatal(err)
		}
		if err := call(t, c); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want the handshake refused", name, err)
		}
		c.Close()
	}
}

func TestFollowerRefusesLeaderCalls(t *testing.T) {
	h := newHarness(t)
	h.backend.leading = false
	c, err := api.Dial("[2001:db8::1]:8081", "n1", newNode(t, h.ca, "n2", "2001:db8::2"), h.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	if r, err := c.Hello(ctx, &pb.HelloRequest{PodPrefix: "2001:db8:2:0:7::/80"}); err != nil || r.Leader || r.LeaderId != "n1" {
		t.Fatalf("Hello on a follower = %v, %v", r, err)
	}
	if _, err := c.ReportEndpoints(ctx, &pb.EndpointReport{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("report to a follower: %v", err)
	}
	if _, err := c.Snapshot(ctx, &pb.SnapshotRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("snapshot from a follower: %v", err)
	}
}

func TestLeaderPushesHints(t *testing.T) {
	h := newHarness(t)
	ca := h.ca
	watch := func(id, addr string) (pb.Coordination_WatchClient, *api.Client) {
		c, err := api.Dial("[2001:db8::1]:8081", "n1", newNode(t, ca, id, addr), h.dial)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		w, err := c.Watch(t.Context(), &pb.WatchRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if first, err := w.Recv(); err != nil || first.Kind != pb.Hint_KIND_UNSPECIFIED {
			t.Fatalf("first watch message = %v, %v", first, err)
		}
		return w, c
	}
	w2, c2 := watch("n2", "2001:db8::2")
	w3, _ := watch("n3", "2001:db8::3")
	if _, err := c2.NotifyIndexChanged(t.Context(), &pb.NotifyRequest{IndexEtag: `"e1"`}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []pb.Coordination_WatchClient{w2, w3} {
		hint, err := w.Recv()
		if err != nil || hint.Kind != pb.Hint_INDEX_CHANGED || hint.IndexEtag != `"e1"` {
			t.Errorf("hint = %v, %v", hint, err)
		}
	}
	h.server.EndWatches()
	if _, err := w2.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("watch after leadership ended: %v, want Unavailable", err)
	}
}

// TestHelloMustMatchTheCertificate: a Hello naming another node ID or
// address than its certificate's is refused before it reaches the
// coordinator; the matching one is registered with the certificate's
// NodeGroup, and Leave removes it.
func TestHelloMustMatchTheCertificate(t *testing.T) {
	h := newHarness(t)
	c, err := api.Dial("[2001:db8::1]:8081", "n1", newNode(t, h.ca, "n2", "2001:db8::2"), h.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	for name, req := range map[string]*pb.HelloRequest{
		"another node ID": {PodPrefix: "2001:db8:2:0:7::/80", NodeId: "n3", Address: "2001:db8::2"},
		"another address": {PodPrefix: "2001:db8:2:0:7::/80", NodeId: "n2", Address: "2001:db8::3"},
	} {
		if _, err := c.Hello(ctx, req); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", name, err)
		}
	}
	if _, ok := h.backend.Registered("n2"); ok {
		t.Fatal("a refused Hello was registered")
	}
	if _, err := c.Hello(ctx, &pb.HelloRequest{PodPrefix: "2001:db8:2:0:7::/80", NodeId: "n2", Address: "2001:db8::2"}); err != nil {
		t.Fatal(err)
	}
	n, ok := h.backend.Registered("n2")
	if !ok || n.NodeGroup != "workers" || n.Addr != netip.MustParseAddr("2001:db8::2") || n.PodPrefix != netip.MustParsePrefix("2001:db8:2:0:7::/80") {
		t.Fatalf("registered %+v, %v", n, ok)
	}
	if r, err := c.Leave(ctx, &pb.LeaveRequest{}); err != nil || r.Revision != 2 {
		t.Fatalf("Leave = %v, %v", r, err)
	}
	if _, ok := h.backend.Registered("n2"); ok {
		t.Fatal("still registered after Leave")
	}
}
