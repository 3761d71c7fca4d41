// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/identity"
)

// Port is the coordination API's TCP port on every node.
const Port = 8081

// PrefixBits is the length of the Pod prefix each node reports.
const PrefixBits = 80

// Endpoint is one ready backend a node reports.
type Endpoint struct {
	Namespace, Service string
	Addr               netip.Addr
}

// Leader names the leader a node knows of.
type Leader struct {
	ID, Addr string
}

// Node is a node as its Hello claims it, bound to its certificate: the ID
// and NodeGroup of its SPIFFE URI, the address of its IP SAN, and the Pod
// /80 it reported.
type Node struct {
	ID, NodeGroup string
	Addr          netip.Addr
	PodPrefix     netip.Prefix
}

// Position names a written snapshot.
type Position struct {
	Term, Generation, Revision uint64
}

// ErrConflict reports a Hello that claims what another live node holds: its
// node ID (two agents share one), its address or its Pod prefix. The
// server refuses it and logs it at ERROR.
var ErrConflict = errors.New("node identity conflict")

// ErrUnregistered reports a node that has no live registration: it must
// send Hello (again).
var ErrUnregistered = errors.New("node not registered")

// Backend is what the server needs from the coordinator.
type Backend interface {
	// Leader returns the leader this node knows of and whether it is this
	// node.
	Leader() (l Leader, leading bool)
	// Register records a Hello (checked against the certificate); an
	// error wrapping ErrConflict refuses it.
	Register(ctx context.Context, n Node) error
	// Registered returns the node's live registration, if any.
	Registered(nodeID string) (Node, bool)
	// Report replaces the node's endpoints (already checked against its
	// /80) and returns the snapshot position that will carry them and the
	// endpoints it refused, each with its reason.
	Report(ctx context.Context, n Node, eps []Endpoint) (Position, []string, error)
	// Leave removes the node's endpoints and registration and returns once
	// a snapshot without them is written.
	Leave(ctx context.Context, n Node) (Position, error)
	// Snapshot returns the current Service snapshot.
	Snapshot(ctx context.Context) (*pb.ServiceSnapshot, error)
	// IndexChanged is told that a node saw deployments/index.json change.
	IndexChanged(etag string)
}

// IndexPoller is a Backend that polls the deployment index while it leads
// and hints every change to the watching followers.
type IndexPoller interface {
	// IndexHint is the first message of a watch: a Hint of kind
	// INDEX_CHANGED with IndexPolled set and the index version last read,
	// or nil when this node does not poll the index now.
	IndexHint() *pb.Hint
}

// RefusalRecorder is a Backend that wants to know of the identity claims
// the server refuses, so that it can publish them (the refused node's
// own state says nothing the operator sees).
type RefusalRecorder interface {
	// Refused is told each refusal of a node's claim and why.
	Refused(peer identity.Peer, reason error)
}

// Authenticator extracts the node identity from a verified connection;
// *identity.Identity is one.
type Authenticator interface {
	Peer(cs tls.ConnectionState) (identity.Peer, error)
}

// Server is one node's coordination API.
type Server struct {
	pb.UnimplementedCoordinationServer
	backend Backend
	auth    Authenticator
	log     *slog.Logger
	grpc    *grpc.Server

	mu       sync.Mutex
	watchers map[chan *pb.Hint]struct{}
	// refused is when each refusal was last logged at ERROR.
	refused map[string]time.Time
}

// NewServer returns a server that authenticates with tlsConfig (a TLS 1.3
// mutual-authentication configuration such as identity.ServerConfig) and
// authorizes with auth.
func NewServer(tlsConfig *tls.Config, auth Authenticator, backend Backend, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{backend: backend, auth: auth, log: log, watchers: map[chan *pb.Hint]struct{}{}, refused: map[string]time.Time{}}
	s.grpc = grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsConfig)),
		grpc.ChainUnaryInterceptor(s.authorizeUnary),
		grpc.ChainStreamInterceptor(s.authorizeStream),
	)
	pb.RegisterCoordinationServer(s.grpc, s)
	return s
}

// Serve serves on lis until Stop.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Stop closes the listeners and every connection at once.
func (s *Server) Stop() { s.grpc.Stop() }

type peerKey struct{}

// caller returns the node authenticated for this call.
func caller(ctx context.Context) identity.Peer {
	p, _ := ctx.Value(peerKey{}).(identity.Peer)
	return p
}

func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "not a TLS connection")
	}
	node, err := s.auth.Peer(info.State)
	if err != nil {
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	return context.WithValue(ctx, peerKey{}, node), nil
}

func (s *Server) authorizeUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := s.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authedStream) Context() context.Context { return a.ctx }

func (s *Server) authorizeStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
		return err
	}
	return handler(srv, authedStream{ServerStream: ss, ctx: ctx})
}

// ParsePodPrefix checks a reported Pod prefix: a canonical global-unicast
// IPv6 /80.
func ParsePodPrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return netip.Prefix{}, fmt.Errorf("pod prefix %q: %w", s, err)
	case !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "" || !p.Addr().IsGlobalUnicast():
		return netip.Prefix{}, fmt.Errorf("pod prefix %q is not a global-unicast IPv6 prefix", s)
	case p.Bits() != PrefixBits:
		return netip.Prefix{}, fmt.Errorf("pod prefix %q is not a /%d", s, PrefixBits)
	case p.Masked() != p || p.String() != s:
		return netip.Prefix{}, fmt.Errorf("pod prefix %q is not canonical: send %s", s, p.Masked())
	}
	return p, nil
}

// Hello registers the caller with the leader and names the leader. Its
// node ID and address must be those of its certificate; the leader
// refuses a claim on another live node's ID, address or Pod prefix.
func (s *Server) Hello(ctx context.Context, req *pb.HelloRequest) (*pb.HelloResponse, error) {
	peer := caller(ctx)
	p, err := ParsePodPrefix(req.GetPodPrefix())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if id := req.GetNodeId(); id != "" && id != peer.NodeID {
		return nil, s.refuse(peer, fmt.Errorf("the Hello names node %q, but the certificate is node %s's", id, peer.NodeID))
	}
	if a := req.GetAddress(); a != "" && a != peer.Addr.String() {
		return nil, s.refuse(peer, fmt.Errorf("the Hello names address %q, but the certificate's IP SAN is %s", a, peer.Addr))
	}
	l, leading := s.backend.Leader()
	if leading {
		n := Node{ID: peer.NodeID, NodeGroup: peer.NodeGroup, Addr: peer.Addr, PodPrefix: p}
		if err := s.backend.Register(ctx, n); err != nil {
			if errors.Is(err, ErrConflict) {
				return nil, s.refuse(peer, err)
			}
			return nil, status.Error(codes.Unavailable, err.Error())
		}
	}
	return &pb.HelloResponse{Leader: leading, LeaderId: l.ID, LeaderAddr: l.Addr}, nil
}

// refuse logs a refused identity claim at ERROR (once a minute for the
// same peer and reason, DEBUG in between) and returns its status.
func (s *Server) refuse(peer identity.Peer, err error) error {
	key := peer.NodeID + "\x00" + peer.Addr.String() + "\x00" + err.Error()
	now := time.Now()
	s.mu.Lock()
	loud := now.Sub(s.refused[key]) >= time.Minute
	if loud {
		if len(s.refused) >= 1024 {
			for k, at := range s.refused {
				if now.Sub(at) >= time.Minute {
					delete(s.refused, k)
				}
			}
		}
		s.refused[key] = now
	}
	s.mu.Unlock()
	level := slog.LevelDebug
	if loud {
		level = slog.LevelError
	}
	s.log.Log(context.Background(), level, "refused a node's identity claim", "peer", peer.NodeID, "peer_nodegroup", peer.NodeGroup,
		"peer_addr", peer.Addr.String(), "err", err)
	if r, ok := s.backend.(RefusalRecorder); ok {
		r.Refused(peer, err)
	}
	return status.Error(codes.PermissionDenied, err.Error())
}

func (s *Server) requireLeader() error {
	if l, leading := s.backend.Leader(); !leading {
		return status.Errorf(codes.FailedPrecondition, "this node does not lead: the leader is %q at %q", l.ID, l.Addr)
	}
	return nil
}

// ReportEndpoints replaces the caller's endpoints, each of which must lie
// in the /80 its Hello reported.
func (s *Server) ReportEndpoints(ctx context.Context, req *pb.EndpointReport) (*pb.ReportResponse, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	node, err := s.registered(ctx)
	if err != nil {
		return nil, err
	}
	eps, err := checkEndpoints(node, req.GetEndpoints())
	if err != nil {
		return nil, err
	}
	pos, refused, err := s.backend.Report(ctx, node, eps)
	if errors.Is(err, ErrUnregistered) {
		return nil, status.Errorf(codes.FailedPrecondition, "%v: send Hello first", err)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &pb.ReportResponse{Term: pos.Term, Generation: pos.Generation, Revision: pos.Revision, Refused: refused}, nil
}

// registered returns the caller's live registration, which must be the
// one of its certificate.
func (s *Server) registered(ctx context.Context) (Node, error) {
	peer := caller(ctx)
	n, ok := s.backend.Registered(peer.NodeID)
	if !ok {
		return Node{}, status.Errorf(codes.FailedPrecondition, "node %s sent no Hello with its Pod prefix: send Hello first", peer.NodeID)
	}
	if n.Addr != peer.Addr || n.NodeGroup != peer.NodeGroup {
		return Node{}, s.refuse(peer, fmt.Errorf("%w: node %s is registered at %s in NodeGroup %s, not at %s in %s", ErrConflict,
			peer.NodeID, n.Addr, n.NodeGroup, peer.Addr, peer.NodeGroup))
	}
	return n, nil
}

// Leave drains the caller: the leader writes a snapshot without its
// endpoints before answering.
func (s *Server) Leave(ctx context.Context, _ *pb.LeaveRequest) (*pb.LeaveResponse, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	peer := caller(ctx)
	n, ok := s.backend.Registered(peer.NodeID)
	if ok && (n.Addr != peer.Addr || n.NodeGroup != peer.NodeGroup) {
		return nil, s.refuse(peer, fmt.Errorf("%w: node %s is registered at %s, not at %s: only it may leave", ErrConflict, peer.NodeID, n.Addr, peer.Addr))
	}
	if !ok {
		n = Node{ID: peer.NodeID, NodeGroup: peer.NodeGroup, Addr: peer.Addr}
	}
	pos, err := s.backend.Leave(ctx, n)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &pb.LeaveResponse{Term: pos.Term, Generation: pos.Generation, Revision: pos.Revision}, nil
}

// Snapshot returns the leader's Service snapshot.
func (s *Server) Snapshot(ctx context.Context, _ *pb.SnapshotRequest) (*pb.ServiceSnapshot, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	snap, err := s.backend.Snapshot(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return snap, nil
}

// NotifyIndexChanged hints every follower to reconcile now.
func (s *Server) NotifyIndexChanged(ctx context.Context, req *pb.NotifyRequest) (*pb.NotifyResponse, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	s.backend.IndexChanged(req.GetIndexEtag())
	s.Broadcast(&pb.Hint{Kind: pb.Hint_INDEX_CHANGED, IndexEtag: req.GetIndexEtag()})
	return &pb.NotifyResponse{}, nil
}

// Watch streams hints to a follower while this node leads.
func (s *Server) Watch(_ *pb.WatchRequest, stream pb.Coordination_WatchServer) error {
	if err := s.requireLeader(); err != nil {
		return err
	}
	ch := make(chan *pb.Hint, 16)
	s.mu.Lock()
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	// The first message tells the follower the watch is established, and
	// a leader that polls the index says so with its current version.
	first := &pb.Hint{}
	if p, ok := s.backend.(IndexPoller); ok {
		if h := p.IndexHint(); h != nil {
			first = h
		}
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case h, ok := <-ch:
			if !ok {
				return status.Error(codes.Unavailable, "leadership ended")
			}
			if err := stream.Send(h); err != nil {
				return err
			}
		}
	}
}

// Broadcast sends h to every watching follower. Hints are best effort: a
// follower whose queue is full misses it and catches up by polling.
func (s *Server) Broadcast(h *pb.Hint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- h:
		default:
		}
	}
}

// EndWatches ends every watch, as when leadership ends.
func (s *Server) EndWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watchers {
		close(ch)
		delete(s.watchers, ch)
	}
}

// Watchers returns how many followers are watching.
func (s *Server) Watchers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}
