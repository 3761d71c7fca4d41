// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/agent/staticpod"
)

// LocalEndpoints derives a node's ready endpoints: for each Service its
// NodeGroup publishes, the kubelet-ready Pods matching the Service's
// namespace and selector, at each of their addresses inside the node's
// Pod prefix. Readiness alone decides; addresses outside the prefix (the
// leader would refuse them) are left out.
func LocalEndpoints(services []staticpod.Service, podList []*corev1.Pod, prefix netip.Prefix) []Endpoint {
	var out []Endpoint
	for _, s := range services {
		if s.Spec == nil {
			continue
		}
		id := ServiceID{Namespace: s.ID.Namespace, Name: s.ID.Name}
		for _, r := range pods.Select(podList, pods.Selector{Namespace: s.ID.Namespace, Labels: s.Spec.Selector}) {
			for _, ip := range r.IPs {
				addr, err := netip.ParseAddr(ip)
				if err != nil || !prefix.Contains(addr) {
					continue
				}
				out = append(out, Endpoint{Service: id, Addr: addr})
			}
		}
	}
	return out
}

// PublishServices implements staticpod.Publisher: the reconciler hands
// over its NodeGroup's Services after each complete publication.
func (c *Coordinator) PublishServices(_ context.Context, services []staticpod.Service) error {
	c.mu.Lock()
	c.services = append([]staticpod.Service(nil), services...)
	c.mu.Unlock()
	c.refreshEndpoints()
	return nil
}

// PodsChanged takes the node's complete Pod set from the kubelet Pods
// API watcher (its Refresh option).
func (c *Coordinator) PodsChanged(podList []*corev1.Pod) {
	c.mu.Lock()
	c.pods = podList
	c.seeReady(podList)
	c.node.podsSeen, c.node.kubeletLost = true, ""
	c.endRetirements(false)
	wake := c.wakeRetirements()
	c.mu.Unlock()
	c.refreshEndpoints()
	c.statusChanged()
	if wake {
		// The new Pod a retirement waited for is ready: the old one may
		// go now.
		c.slotFreed()
	}
}

// refreshEndpoints derives this node's endpoints and sets them in one step
// with the withdrawals of its rollout slots, so that a slot granted
// meanwhile is never undone by endpoints derived before it.
func (c *Coordinator) refreshEndpoints() {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return // the node is leaving: its endpoints stay withdrawn
	}
	eps := c.localEndpoints() // only addresses inside the node's prefix
	c.local = eps
	l := c.leader
	known := c.localKnown()
	c.mu.Unlock()
	if l != nil && known {
		l.report(c.opts.NodeID, eps, c.clock.Now())
	}
	c.poke()
}

var _ staticpod.Publisher = (*Coordinator)(nil)
