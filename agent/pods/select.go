// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pods

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Selector picks a Service's backends: its namespace and equality selector.
type Selector struct {
	Namespace string
	Labels    map[string]string
}

// Ready is one ready Pod.
type Ready struct {
	Namespace, Name, UID string
	// IPs are the Pod's addresses as kubelet reports them.
	IPs []string
}

// IsReady reports whether kubelet computed PodReady=True for p.
func IsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Matches reports whether p is in the selector's namespace and carries
// every selector label. An empty selector matches nothing: a Service
// always selects.
func (s Selector) Matches(p *corev1.Pod) bool {
	if len(s.Labels) == 0 || cmp.Or(p.Namespace, "default") != cmp.Or(s.Namespace, "default") {
		return false
	}
	for k, v := range s.Labels {
		if got, ok := p.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Select returns the ready Pods matching s, sorted by namespace and name.
func Select(pods []*corev1.Pod, s Selector) []Ready {
	var out []Ready
	for _, p := range pods {
		if !s.Matches(p) || !IsReady(p) {
			continue
		}
		r := Ready{Namespace: cmp.Or(p.Namespace, "default"), Name: p.Name, UID: string(p.UID)}
		for _, ip := range p.Status.PodIPs {
			r.IPs = append(r.IPs, ip.IP)
		}
		if len(r.IPs) == 0 && p.Status.PodIP != "" {
			r.IPs = []string{p.Status.PodIP}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Ready) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
