// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/state"
)

func pod(ns, name, app string, ready bool, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": app}}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func published(ns, name, app string) staticpod.Service {
	return staticpod.Service{
		ID:   state.ServiceID{Namespace: ns, Name: name},
		Spec: &manifest.Service{Name: name, Namespace: ns, Selector: map[string]string{"app": app}},
	}
}

func samplePods() []*corev1.Pod {
	return []*corev1.Pod{
		pod("product", "web-0", "web", true, "10.0.0.1", "2001:db8:100::5"),
		pod("product", "web-1", "web", false, "2001:db8:100::6"),
		pod("product", "web-2", "web", true, "2001:db8:999::7"),
		pod("product", "db-0", "db", true, "2001:db8:100::8"),
		pod("other", "web-x", "web", true, "2001:db8:100::9"),
	}
}

func TestLocalEndpoints(t *testing.T) {
	got := coordinator.LocalEndpoints(
		[]staticpod.Service{published("product", "web", "web"), published("product", "database", "db")},
		samplePods(), netip.MustParsePrefix("2001:db8:100::/80"))
	want := []coordinator.Endpoint{ep(web, "2001:db8:100::5"), ep(db, "2001:db8:100::8")}
	if !slices.Equal(got, want) {
		t.Errorf("LocalEndpoints = %v, want %v (ready, matching, inside the /80)", got, want)
	}
}

// TestPublishedServicesAndReadyPodsReachTheSnapshot feeds one agent the
// reconciler's Services and the kubelet's Pods, as the agent does.
func TestPublishedServicesAndReadyPodsReachTheSnapshot(t *testing.T) {
	agents := startLocal(t, newBucket(t), 1, []coordinator.ServiceID{web, db})
	a := agents[0]
	prefix := a.prefix.Addr().As16()
	inside := func(last byte) string { p := prefix; p[15] = last; return netip.AddrFrom16(p).String() }
	a.coord.PublishServices(t.Context(), []staticpod.Service{published("product", "web", "web")})
	a.coord.PodsChanged([]*corev1.Pod{pod("product", "web-0", "web", true, inside(5)), pod("product", "web-1", "web", false, inside(6))})
	eventually(t, 5*time.Second, "the ready Pod is a backend", func() bool {
		return slices.Equal(a.backends(web), []string{inside(5)})
	})
	// Readiness changes backends, never the Service identities.
	a.coord.PodsChanged([]*corev1.Pod{pod("product", "web-0", "web", false, inside(5))})
	eventually(t, 5*time.Second, "no ready Pod", func() bool {
		return len(a.backends(web)) == 0 && len(a.lastView().GetServices()) == 2
	})
}
