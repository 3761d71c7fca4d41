// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
)

// Retention is how long a follower keeps the backends of its last
// snapshot without hearing from a leader: the 35-second lease window.
const Retention = 35 * time.Second

// ServiceID is a namespaced Service, the identity DNS serves.
type ServiceID struct {
	Namespace, Name string
}

// Endpoint is one ready backend of a Service on some node.
type Endpoint struct {
	Service ServiceID
	Addr    netip.Addr
}

// NodeReport is what one node last reported.
type NodeReport struct {
	NodeID    string
	Endpoints []Endpoint
}

// BuildSnapshot makes the deterministic snapshot of services with the
// ready endpoints reported for them. Endpoints of Services not in services
// are dropped (only the deployment index defines Services); a Service
// without endpoints keeps its DNS identity. Equal inputs, in any order,
// give equal bytes under Marshal.
func BuildSnapshot(services []ServiceID, reports []NodeReport) *pb.ServiceSnapshot {
	byID := map[ServiceID]*pb.Service{}
	snap := &pb.ServiceSnapshot{}
	for _, id := range services {
		if _, dup := byID[id]; dup {
			continue
		}
		s := &pb.Service{Namespace: id.Namespace, Name: id.Name}
		byID[id] = s
		snap.Services = append(snap.Services, s)
	}
	seen := map[ServiceID]map[netip.Addr]bool{}
	for _, r := range reports {
		for _, ep := range r.Endpoints {
			s := byID[ep.Service]
			if s == nil || !ep.Addr.IsValid() {
				continue
			}
			if seen[ep.Service] == nil {
				seen[ep.Service] = map[netip.Addr]bool{}
			}
			if seen[ep.Service][ep.Addr] {
				continue
			}
			seen[ep.Service][ep.Addr] = true
			s.Endpoints = append(s.Endpoints, &pb.Endpoint{Address: ep.Addr.String(), NodeId: r.NodeID})
		}
	}
	slices.SortFunc(snap.Services, func(a, b *pb.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, s := range snap.Services {
		slices.SortFunc(s.Endpoints, func(a, b *pb.Endpoint) int {
			x, _ := netip.ParseAddr(a.Address)
			y, _ := netip.ParseAddr(b.Address)
			return cmp.Or(x.Compare(y), cmp.Compare(a.NodeId, b.NodeId))
		})
	}
	return snap
}

// Marshal encodes a snapshot deterministically.
func Marshal(s *pb.ServiceSnapshot) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(s)
}

// Unmarshal decodes a snapshot.
func Unmarshal(data []byte) (*pb.ServiceSnapshot, error) {
	s := &pb.ServiceSnapshot{}
	if err := proto.Unmarshal(data, s); err != nil {
		return nil, err
	}
	return s, nil
}

// sameContent reports whether two snapshots carry the same Services,
// endpoints and nodes, whatever their term, generation and revision.
func sameContent(a, b *pb.ServiceSnapshot) bool {
	if a == nil || b == nil {
		return a == b
	}
	return proto.Equal(&pb.ServiceSnapshot{Services: a.Services, Nodes: a.Nodes}, &pb.ServiceSnapshot{Services: b.Services, Nodes: b.Nodes})
}

// WithoutBackends returns a copy of s that keeps every Service's DNS
// identity and drops its leased backends.
func WithoutBackends(s *pb.ServiceSnapshot) *pb.ServiceSnapshot {
	out := &pb.ServiceSnapshot{Term: s.GetTerm(), Generation: s.GetGeneration(), Revision: s.GetRevision(), LeaderId: s.GetLeaderId()}
	for _, svc := range s.GetServices() {
		out.Services = append(out.Services, &pb.Service{Namespace: svc.Namespace, Name: svc.Name})
	}
	return out
}

// newer reports whether a is a later write than b: a higher lease term,
// within one term a higher generation, within one generation a higher
// revision.
func newer(a, b *pb.ServiceSnapshot) bool {
	if b == nil {
		return true
	}
	return cmp.Or(cmp.Compare(a.GetTerm(), b.GetTerm()), cmp.Compare(a.GetGeneration(), b.GetGeneration()),
		cmp.Compare(a.GetRevision(), b.GetRevision())) > 0
}

// sameLeadership reports whether a and b were written by one leadership.
func sameLeadership(a, b *pb.ServiceSnapshot) bool {
	return a.GetTerm() == b.GetTerm() && a.GetGeneration() == b.GetGeneration() && a.GetLeaderId() == b.GetLeaderId()
}
