// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package api

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/internal/ids"
)

// Bounds of a status report: a node reports each deployment of its
// NodeGroup once, with short strings.
const (
	maxReportedDeployments = 10000
	maxReportString        = 4096
)

// RolloutBackend is what the server needs from the coordinator for
// observed state and rolling updates; a Backend without it answers
// Unimplemented.
type RolloutBackend interface {
	// ReportStatus replaces what the node reports about its deployments.
	ReportStatus(ctx context.Context, n Node, r *pb.StatusReport) error
	// AcquireSlot decides on a rollout slot; a granted one replaces the
	// node's endpoints with eps (already checked against its /80).
	AcquireSlot(ctx context.Context, n Node, req *pb.SlotRequest, eps []Endpoint) (*pb.SlotResponse, error)
	// ConfirmApplied records the snapshot the node's Service DNS and
	// dataplane hold now.
	ConfirmApplied(ctx context.Context, n Node, at Position) error
}

func (s *Server) rollouts() (RolloutBackend, error) {
	rb, ok := s.backend.(RolloutBackend)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this node does not take status reports or pace rollouts")
	}
	return rb, nil
}

// ReportStatus replaces the caller's deployment reports.
func (s *Server) ReportStatus(ctx context.Context, req *pb.StatusReport) (*pb.StatusReportResponse, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	node, err := s.registered(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkReport(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	rb, err := s.rollouts()
	if err != nil {
		return nil, err
	}
	if err := rb.ReportStatus(ctx, node, req); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &pb.StatusReportResponse{}, nil
}

// checkReport refuses a report the leader would publish unchecked: names
// that are not deployment names, repeated names, oversized strings.
func checkReport(r *pb.StatusReport) error {
	if n := len(r.GetDeployments()); n > maxReportedDeployments {
		return fmt.Errorf("%d deployments reported, more than %d", n, maxReportedDeployments)
	}
	seen := map[string]bool{}
	for _, d := range r.GetDeployments() {
		if err := ids.ValidateNodeGroup(d.GetName()); err != nil {
			return fmt.Errorf("deployment %q: not a deployment name", d.GetName())
		}
		if seen[d.GetName()] {
			return fmt.Errorf("deployment %s is reported twice", d.GetName())
		}
		seen[d.GetName()] = true
		for _, v := range []string{d.GetRevision(), d.GetDesired(), d.GetReason(), d.GetWaiting(), d.GetGranted(), d.GetRetiring(),
			d.GetError().GetKind(), d.GetError().GetMessage(), d.GetError().GetRevision()} {
			if len(v) > maxReportString {
				return fmt.Errorf("deployment %s: a reported string is longer than %d bytes", d.GetName(), maxReportString)
			}
		}
	}
	return nil
}

// AcquireSlot asks for a rollout slot. The endpoints the caller keeps must
// lie in its Pod /80, as reported ones do.
func (s *Server) AcquireSlot(ctx context.Context, req *pb.SlotRequest) (*pb.SlotResponse, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	node, err := s.registered(ctx)
	if err != nil {
		return nil, err
	}
	if err := ids.ValidateNodeGroup(req.GetDeployment()); err != nil || req.GetRevision() == "" || len(req.GetRevision()) > maxReportString {
		return nil, status.Errorf(codes.InvalidArgument, "slot request for deployment %q at revision %q: name a deployment and a revision", req.GetDeployment(), req.GetRevision())
	}
	eps, err := checkEndpoints(node, req.GetEndpoints())
	if err != nil {
		return nil, err
	}
	rb, err := s.rollouts()
	if err != nil {
		return nil, err
	}
	resp, err := rb.AcquireSlot(ctx, node, req, eps)
	if errors.Is(err, ErrUnregistered) {
		return nil, status.Errorf(codes.FailedPrecondition, "%v: send Hello first", err)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return resp, nil
}

// checkEndpoints parses reported endpoints: canonical addresses inside the
// node's Pod /80, each of a namespaced Service.
func checkEndpoints(node Node, reported []*pb.ReportedEndpoint) ([]Endpoint, error) {
	eps := make([]Endpoint, 0, len(reported))
	for _, e := range reported {
		addr, err := netip.ParseAddr(e.GetAddress())
		if err != nil || addr.String() != e.GetAddress() || addr.Zone() != "" {
			return nil, status.Errorf(codes.InvalidArgument, "endpoint address %q is not a canonical IPv6 address", e.GetAddress())
		}
		if !node.PodPrefix.Contains(addr) {
			return nil, status.Errorf(codes.PermissionDenied, "endpoint %s of %s/%s is outside node %s's Pod prefix %s", addr, e.GetNamespace(), e.GetService(), node.ID, node.PodPrefix)
		}
		if e.GetNamespace() == "" || e.GetService() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "endpoint %s names no namespaced Service", addr)
		}
		eps = append(eps, Endpoint{Namespace: e.GetNamespace(), Service: e.GetService(), Addr: addr})
	}
	return eps, nil
}

// ConfirmApplied records which snapshot the caller applied.
func (s *Server) ConfirmApplied(ctx context.Context, req *pb.AppliedRequest) (*pb.AppliedResponse, error) {
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	node, err := s.registered(ctx)
	if err != nil {
		return nil, err
	}
	rb, err := s.rollouts()
	if err != nil {
		return nil, err
	}
	if err := rb.ConfirmApplied(ctx, node, Position{Term: req.GetTerm(), Generation: req.GetGeneration(), Revision: req.GetRevision()}); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &pb.AppliedResponse{}, nil
}
