// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
)

// registry is one leadership's binding of node IDs to their NodeGroup,
// address and Pod prefix: the first live claim wins, and a record stays
// live for the retention window after its node was last heard from. It is
// published in every snapshot, so the next leader starts from it.
type registry struct {
	nodes map[string]registration
}

type registration struct {
	node api.Node
	seen time.Time
}

func newRegistry() *registry { return &registry{nodes: map[string]registration{}} }

// seed installs the nodes of a stored snapshot as heard from at now:
// their claims hold against newcomers for one retention window.
func (r *registry) seed(nodes []*pb.Node, now time.Time) {
	for _, n := range nodes {
		addr, err := netip.ParseAddr(n.GetAddress())
		if err != nil {
			continue
		}
		prefix, err := api.ParsePodPrefix(n.GetPodPrefix())
		if err != nil || n.GetNodeId() == "" {
			continue
		}
		r.nodes[n.GetNodeId()] = registration{node: api.Node{ID: n.GetNodeId(), NodeGroup: n.GetNodegroup(), Addr: addr, PodPrefix: prefix}, seen: now}
	}
}

// expire forgets the records not heard from within retention.
func (r *registry) expire(now time.Time, retention time.Duration) {
	for id, reg := range r.nodes {
		if now.Sub(reg.seen) > retention {
			delete(r.nodes, id)
		}
	}
}

// register records n's claim at now, or refuses it with api.ErrConflict
// when a live record of another agent holds its node ID, or another node
// holds its address or Pod prefix.
func (r *registry) register(n api.Node, now time.Time, retention time.Duration) error {
	r.expire(now, retention)
	for id, reg := range r.nodes {
		o := reg.node
		switch {
		case id == n.ID && (o.Addr != n.Addr || o.PodPrefix != n.PodPrefix || o.NodeGroup != n.NodeGroup):
			return fmt.Errorf("%w: node ID %s is in use by another agent at %s (NodeGroup %s, Pod prefix %s): two agents share one node ID; give each its own",
				api.ErrConflict, n.ID, o.Addr, o.NodeGroup, o.PodPrefix)
		case id != n.ID && o.PodPrefix == n.PodPrefix:
			return fmt.Errorf("%w: Pod prefix %s is registered to node %s at %s", api.ErrConflict, n.PodPrefix, id, o.Addr)
		case id != n.ID && o.Addr == n.Addr:
			return fmt.Errorf("%w: address %s is registered to node %s", api.ErrConflict, n.Addr, id)
		}
	}
	r.nodes[n.ID] = registration{node: n, seen: now}
	return nil
}

// lookup returns the live record of id.
func (r *registry) lookup(id string, now time.Time, retention time.Duration) (api.Node, bool) {
	reg, ok := r.nodes[id]
	if !ok || now.Sub(reg.seen) > retention {
		return api.Node{}, false
	}
	return reg.node, true
}

// heard renews id's record at now.
func (r *registry) heard(id string, now time.Time) {
	if reg, ok := r.nodes[id]; ok {
		reg.seen = now
		r.nodes[id] = reg
	}
}

// list is the records for a snapshot, sorted by node ID.
func (r *registry) list() []*pb.Node {
	out := make([]*pb.Node, 0, len(r.nodes))
	for _, reg := range r.nodes {
		n := reg.node
		out = append(out, &pb.Node{NodeId: n.ID, Nodegroup: n.NodeGroup, Address: n.Addr.String(), PodPrefix: n.PodPrefix.String()})
	}
	slices.SortFunc(out, func(a, b *pb.Node) int { return cmp.Compare(a.NodeId, b.NodeId) })
	return out
}
