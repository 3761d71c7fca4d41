// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// lostBound is how long a lost node's endpoints may stay in the other
// nodes' dataplanes: the lease window a follower keeps a silent node's
// endpoints (coordinator.Retention, the spec's 35 s) and 10 s for the
// leader's snapshot to reach every node.
const lostBound = coordinator.Retention + 10*time.Second

// afterBound is how long the client keeps going once the bound passed.
const afterBound = 10 * time.Second

// nodeLost loses a node that does not lead, as a VM that dies: its agent
// and kubelet are SIGKILLed and its link taken off the network (its Pods
// can no longer answer, and the client, as a load balancer would, stops
// entering through it). Its Pod's address must leave every other node's
// dataplane within lostBound, every request after that bound must
// answer, and podmin status must name the node.
func (r *run) nodeLost(p *e2enode.Proof) {
	rec, err := r.leader()
	if err != nil {
		p.Fatalf("the lease: %v", err)
	}
	nodes := r.liveNodes(workers)
	var victim *node
	for i := len(nodes) - 1; i >= 0; i-- {
		if nodes[i].id != rec.LeaderID {
			victim = nodes[i]
			break
		}
	}
	if victim == nil {
		p.Fatal("no node but the leader to lose")
	}
	podIP := servingIP(victim, "web")
	if !podIP.IsValid() {
		p.Fatalf("%s serves no ready web Pod to lose", victim.id)
	}
	l := r.startLoad("default", "web", func() []*node { return r.liveNodes(workers) })
	time.Sleep(baseline)
	lost := time.Now()
	victim.mu.Lock()
	victim.lost = true
	victim.mu.Unlock()
	for _, name := range []string{"podmin-agent", "kubelet"} {
		if d := victim.daemon(name); d != nil && !d.Exited() {
			_ = d.Cmd.Process.Signal(syscall.SIGKILL)
			<-d.Done()
		}
	}
	if err := unplug(victim.port); err != nil {
		l.stop()
		p.Fatal(err)
	}
	others := ids(r.liveNodes(workers))
	var left time.Time
	var gone map[string]time.Time
	werr := r.waitErr(lostBound+afterBound, fmt.Sprintf("%s's Pod %s out of every other node's dataplane", victim.id, podIP), func() bool {
		left, gone = leftEvery(r.planes.snapshot(), others, podIP, lost, time.Now())
		return !left.IsZero()
	})
	if end := lost.Add(lostBound + afterBound); time.Now().Before(end) {
		time.Sleep(time.Until(end)) // the client keeps going past the bound
	}
	shots := l.stop()
	var perNode []string
	for _, n := range others {
		perNode = append(perNode, fmt.Sprintf("%s %s", n, offset(gone[n], lost)))
	}
	if werr != nil {
		p.Errorf("%s's Pod %s was still in some dataplane %s after the loss (left: %s)", victim.id, podIP, lostBound+afterBound, strings.Join(perNode, ", "))
	} else {
		p.Figure("%s (not the leader) lost at 0s: its Pod %s left every other dataplane at %s (%s; bound %s)",
			victim.id, podIP, offset(left, lost), strings.Join(perNode, ", "), lostBound)
		if left.Sub(lost) > lostBound {
			p.Errorf("its endpoints left the dataplanes %s after the loss, beyond the bound %s", left.Sub(lost).Round(10*time.Millisecond), lostBound)
		}
	}
	name := podNamer(r.pods.snapshot(), lost)
	steady := tallyShots(shots, lost.Add(-baseline), lost)
	before := tallyShots(shots, lost, lost.Add(lostBound))
	after := tallyShots(shots, lost.Add(lostBound), time.Now())
	p.Figure("client before the loss: %s", steady.summary(lost))
	if steady.failed > 0 {
		p.Figure("failed before the loss: %s", steady.failureList(lost, 4, name, r.planes.snapshot()))
	}
	p.Figure("client from the loss to the bound: %s", before.summary(lost))
	if before.failed > 0 {
		p.Figure("where the ones failed before the bound were sent: %s; first: %s", before.backendsOfFailures(name), before.failureList(lost, 4, name, r.planes.snapshot()))
	}
	p.Figure("client after the bound: %s", after.summary(lost))
	if after.failed > 0 {
		p.Errorf("%d of %d requests after the bound failed: %s", after.failed, after.sent, after.failureList(lost, 12, name, r.planes.snapshot()))
	}
	// What a user reads: the table. Its JSON is checked too, to say
	// where the name is missing.
	table, terr := r.podmin(nil, "status", "web", "-g", workers)
	js, jerr := r.podmin(nil, "status", "web", "-g", workers, "-o", "json")
	var named []string
	for _, line := range strings.Split(table+fmt.Sprint(terr), "\n") {
		if strings.Contains(line, victim.id) {
			named = append(named, strings.TrimSpace(line))
		}
	}
	inJSON := strings.Contains(js+fmt.Sprint(jerr), `"`+victim.id+`"`)
	if len(named) == 0 {
		p.Errorf("podmin status does not name %s (its -o json does: %v):\n%s%v", victim.id, inJSON, table, terr)
	} else {
		p.Figure("podmin status names it: %q (and -o json: %v)", strings.Join(named, " | "), inJSON)
	}
}
