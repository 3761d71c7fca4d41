// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/internal/state"
)

// A second agent under a live node's ID is refused by the leader: it
// says so itself (OnRefused, the agent's /readyz) and the leader names it
// in its NodeGroup's status object, until it has gone for a lease window.
func TestRefusedNodeSaysSoAndIsInTheStatus(t *testing.T) {
	store := newBucket(t)
	c := newLocalCluster(t, fastTiming, fastRetention, inNodeGroup("workers", web))
	var mu sync.Mutex
	refusals := map[string][]error{}
	c.tune = func(spec agentSpec, o *coordinator.Options) {
		key := spec.id + "@" + spec.addr.String()
		o.OnRefused = func(err error) {
			mu.Lock()
			refusals[key] = append(refusals[key], err)
			mu.Unlock()
		}
	}
	first := c.start(t, c.spec(0, store))
	eventually(t, 5*time.Second, "node-0 leads", first.coord.Elector().IsLeader)
	real := c.start(t, c.spec(1, store))
	eventually(t, 5*time.Second, "node-1 registered with the leader", func() bool {
		st := readStatus(t, store)
		return st != nil && st.Live == 2
	})
	twin := c.spec(1, store)
	twin.addr = netip.MustParseAddr("2001:db8::99")
	twin.prefix = netip.MustParsePrefix("2001:db8:999::/80")
	impostor := c.start(t, twin)
	eventually(t, 10*time.Second, "the second node-1 knows it is refused", func() bool {
		return strings.Contains(impostor.coord.Refusal(), "node ID node-1 is in use by another agent")
	})
	mu.Lock()
	got := refusals["node-1@2001:db8::99"]
	mu.Unlock()
	if len(got) != 1 || got[0] == nil || !strings.Contains(got[0].Error(), "the leader node-0 refused this node") {
		t.Fatalf("OnRefused of the second node-1: %v", got)
	}
	if r := real.coord.Refusal(); r != "" {
		t.Fatalf("the first node-1 is refused too: %s", r)
	}
	st := readStatusWhen(t, store, func(s *state.NodeGroupStatus) bool { return len(s.Refused) == 1 })
	if r := st.Refused[0]; r.Node != "node-1" || r.Address != "2001:db8::99" || !strings.Contains(r.Reason, "in use by another agent") {
		t.Fatalf("refused %+v", r)
	}
	// It goes: after a lease window the status no longer names it.
	impostor.stop()
	readStatusWhen(t, store, func(s *state.NodeGroupStatus) bool { return len(s.Refused) == 0 })
}
