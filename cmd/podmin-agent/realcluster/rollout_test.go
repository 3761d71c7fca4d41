// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// Windows of client traffic around each rollout.
const (
	baseline = 3 * time.Second // before the deploy
	tail     = 3 * time.Second // after the last node serves the new revision
)

// rolled is what one rollout of web came to.
type rolled struct {
	start, done time.Time // the deploy began; the last node served the new revision
	deployTook  time.Duration
	deployErr   error
	from, to    string // revisions
	shots       tally
	between     between
	turns       []turnover
	nodes       []string
}

// rollout rolls web to image under the client while the samplers watch,
// calling during (when set) in its own goroutine once the deploy starts;
// it returns when every live node serves the new revision (or after 5
// minutes) and the tail has passed.
func (r *run) rollout(p *e2enode.Proof, image string, during func(start time.Time)) rolled {
	nodes := r.liveNodes(workers)
	var ro rolled
	ro.nodes = ids(nodes)
	rounds := r.pods.snapshot()
	if len(rounds) == 0 {
		p.Fatal("the Pods API sampler has not run")
	}
	last := rounds[len(rounds)-1]
	for _, n := range nodes {
		ok, rev := last.serving(n.id, "web")
		if !ok {
			p.Fatalf("%s serves no ready web Pod before the rollout", n.id)
		}
		if ro.from == "" {
			ro.from = rev
		} else if rev != ro.from {
			p.Fatalf("the nodes serve revisions %s and %s before the rollout", ro.from, rev)
		}
	}
	l := r.startLoad("default", "web", func() []*node { return r.liveNodes(workers) })
	time.Sleep(baseline) // the client's traffic before the deploy
	ro.start = time.Now()
	duringDone := make(chan struct{})
	go func() {
		defer close(duringDone)
		if during != nil {
			during(ro.start)
		}
	}()
	_, ro.deployErr = r.podmin(nil, "deploy", "web", "-g", workers, "--image", image, "--service", "--secret", "token", "--wait", "--timeout", "5m")
	ro.deployTook = time.Since(ro.start)
	r.rollouts++
	err := r.waitErr(5*time.Minute, "every node serving the new revision of web", func() bool {
		rounds := r.pods.snapshot()
		last := rounds[len(rounds)-1]
		if !last.at.After(ro.start) {
			return false
		}
		for _, n := range r.liveNodes(workers) {
			ok, rev := last.serving(n.id, "web")
			if !ok || rev == ro.from {
				return false
			}
			ro.to = rev
		}
		ro.done = last.at
		return true
	})
	<-duringDone
	time.Sleep(tail)
	shots := l.stop()
	ro.shots = tallyShots(shots, ro.start.Add(-baseline), time.Now())
	rounds = r.pods.snapshot()
	end := ro.done
	if end.IsZero() {
		end = time.Now()
	}
	ro.between = betweenRevisions(rounds, ro.nodes, "web", ro.start, end)
	ro.turns = turnovers(rounds, ro.nodes, "web", ro.to, ro.start, end)
	if ro.deployErr != nil {
		p.Errorf("podmin deploy --wait: %v", ro.deployErr)
	}
	if err != nil {
		p.Errorf("%v", err)
	}
	return ro
}

// report records the rollout's figures and fails p on a failed request
// (when strict) or on two nodes between revisions.
func (r *run) report(p *e2enode.Proof, ro rolled, strict bool) {
	if !ro.done.IsZero() {
		p.Figure("rollout %s → %s: podmin deploy --wait returned after %s; every node served the new revision %s after the deploy",
			short(ro.from), short(ro.to), ro.deployTook.Round(10*time.Millisecond), ro.done.Sub(ro.start).Round(10*time.Millisecond))
	}
	var turns []string
	for _, t := range ro.turns {
		turns = append(turns, fmt.Sprintf("%s old last served %s, new first served %s", t.node, offset(t.lastOld, ro.start), offset(t.cameNew, ro.start)))
	}
	p.Figure("per node (Pods API, every %s): %s", podsEvery, strings.Join(turns, "; "))
	p.Figure("client (%d new connections/s through %s, one keep-alive stream per node): %s", newPerSecond, strings.Join(ro.nodes, ", "),
		ro.shots.summary(ro.start))
	r.drains(p, ro)
	if ro.shots.failed > 0 {
		name := podNamer(r.pods.snapshot(), ro.start)
		msg := fmt.Sprintf("%d of %d requests failed (times from the deploy): %s; where the dataplanes sent them: %s", ro.shots.failed, ro.shots.sent,
			ro.shots.failureList(ro.start, 12, name, r.planes.snapshot()), ro.shots.backendsOfFailures(name))
		if strict {
			p.Error(msg)
		} else {
			p.Figure("%s", msg)
		}
	}
	b := ro.between
	switch {
	case b.most > 1:
		p.Errorf("%d nodes between revisions at once at %s: %s", b.most, offset(b.at, ro.start), strings.Join(b.nodes, ", "))
	case b.most+b.unknown > 1:
		p.Errorf("unproven: at most %d node(s) seen between revisions, but %d node(s)' Pods API did not answer at once", b.most, b.unknown)
	default:
		p.Figure("at most %d node between revisions at once over %d looks at every kubelet's Pods API", b.most, b.rounds)
	}
}

// drains reports, for each Pod the rollout replaced, when its address
// had left every node's dataplane and when its node stopped serving it:
// withdrawal must come first, with time for the connections on it to end.
func (r *run) drains(p *e2enode.Proof, ro rolled) {
	rounds := r.pods.snapshot()
	planes := r.planes.snapshot()
	var out []string
	for _, t := range ro.turns {
		old := servedAt(rounds, t.node, "web", ro.from, ro.start)
		if !old.IsValid() {
			continue
		}
		left, _ := leftEvery(planes, ro.nodes, old, ro.start, ro.done.Add(tail))
		if left.IsZero() {
			out = append(out, fmt.Sprintf("%s's %s still in some dataplane at the end", t.node, old))
			continue
		}
		order := fmt.Sprintf("%s before the stop", t.lastOld.Sub(left).Round(10*time.Millisecond))
		if left.After(t.lastOld) {
			order = fmt.Sprintf("stopped %s before", left.Sub(t.lastOld).Round(10*time.Millisecond))
		}
		out = append(out, fmt.Sprintf("%s's %s out of every dataplane %s, its node stopping it %s (%s)",
			t.node, old, offset(left, ro.start), offset(t.lastOld, ro.start), order))
	}
	p.Figure("withdrawal before stop (dataplanes read every %s): %s", planeEvery, strings.Join(out, "; "))
}

// servedAt is the address of node's ready Pod of svc at revision rev in
// the last round before t.
func servedAt(rounds []round, node, svc, rev string, t time.Time) netip.Addr {
	var a netip.Addr
	for _, r := range rounds {
		if r.at.After(t) {
			break
		}
		for _, p := range r.pods[node] {
			if p.service == svc && p.revision == rev && p.ready {
				a = p.ip
			}
		}
	}
	return a
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// plainRollout: hello:v1 → hello:v2.
func (r *run) plainRollout(p *e2enode.Proof) {
	ro := r.rollout(p, "hello:v2", nil)
	r.report(p, ro, true)
	if !ro.done.IsZero() {
		r.plain = ro.done.Sub(ro.start)
	}
}

// leaderKilled: hello:v2 → hello:v3 with the leader's agent SIGKILLed 8 s
// after the deploy and started again 5 s later, as its unit does.
func (r *run) leaderKilled(p *e2enode.Proof) {
	rec, err := r.leader()
	if err != nil {
		p.Fatalf("the lease: %v", err)
	}
	var victim *node
	for _, n := range r.liveNodes(workers) {
		if n.id == rec.LeaderID {
			victim = n
		}
	}
	if victim == nil {
		p.Fatalf("the lease names %q, no live node", rec.LeaderID)
	}
	var killed, restarted time.Time
	var restartErr error
	newLeader := make(chan string, 1)
	ro := r.rollout(p, "hello:v3", func(start time.Time) {
		time.Sleep(time.Until(start.Add(8 * time.Second)))
		d := victim.daemon("podmin-agent")
		killed = time.Now()
		_ = d.Cmd.Process.Signal(syscall.SIGKILL)
		<-d.Done()
		go func() {
			// Who leads next, and when: the lease's next holder or term.
			deadline := time.Now().Add(2 * time.Minute)
			for time.Now().Before(deadline) {
				if next, err := r.leader(); err == nil && next.LeaderID != "" && (next.LeaderID != rec.LeaderID || next.Term != rec.Term) {
					newLeader <- fmt.Sprintf("%s (term %d) at %s", next.LeaderID, next.Term, offset(time.Now(), start))
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			newLeader <- "no other holder or term within 2 minutes"
		}()
		time.Sleep(time.Until(killed.Add(5 * time.Second)))
		restarted = time.Now()
		restartErr = r.startAgent(victim)
	})
	p.Figure("leader %s (term %d)'s agent SIGKILLed at %s, started again at %s; next lease: %s",
		victim.id, rec.Term, offset(killed, ro.start), offset(restarted, ro.start), <-newLeader)
	if restartErr != nil {
		p.Errorf("the restarted agent: %v", restartErr)
	}
	if killed.After(ro.done) && !ro.done.IsZero() {
		p.Errorf("the rollout ended at %s, before the kill: nothing was proven", offset(ro.done, ro.start))
	}
	r.report(p, ro, true)
	r.fewest(p, ro)
	if ro.done.IsZero() {
		return
	}
	took := ro.done.Sub(ro.start)
	switch {
	case r.plain == 0:
		p.Errorf("no plain rollout duration to compare with (proof 2 did not finish)")
	case took > r.plain*3/2:
		p.Errorf("the rollout took %s, %.2f times the plain rollout's %s (at most 1.5)", took.Round(10*time.Millisecond), float64(took)/float64(r.plain), r.plain.Round(10*time.Millisecond))
	default:
		p.Figure("%.2f times the plain rollout's %s", float64(took)/float64(r.plain), r.plain.Round(10*time.Millisecond))
	}
}

// fewest reports the fewest web backends each dataplane held during the
// rollout: with maxUnavailable 1 a dataplane should never hold fewer
// than all but one.
func (r *run) fewest(p *e2enode.Proof, ro rolled) {
	end := ro.done
	if end.IsZero() {
		end = time.Now()
	}
	var out []string
	for node, f := range fewestBackends(r.planes.snapshot(), r.podPrefixes(), ro.start, end) {
		out = append(out, fmt.Sprintf("%s %d at %s", node, f.n, offset(f.at, ro.start)))
	}
	p.Figure("fewest web backends in each node's dataplane during the rollout (of %d Pods): %s", len(ro.nodes), strings.Join(slices.Sorted(slices.Values(out)), ", "))
}

// waitingRestarted: hello:v3 → hello:v4 with the agent of a node that
// still waits for its slot restarted (SIGTERM, then started again, as
// systemctl restart does) once another node is replacing its Pod.
func (r *run) waitingRestarted(p *e2enode.Proof) {
	var victim *node
	var restartAt, busy time.Time
	var restartErr error
	rounds := r.pods.snapshot()
	_, from := rounds[len(rounds)-1].serving(r.liveNodes(workers)[0].id, "web")
	ro := r.rollout(p, "hello:v4", func(start time.Time) {
		deadline := start.Add(2 * time.Minute)
		for victim == nil && time.Now().Before(deadline) {
			rounds := r.pods.snapshot()
			last := rounds[len(rounds)-1]
			var turning, waiting []*node
			for _, n := range r.liveNodes(workers) {
				if ok, rev := last.serving(n.id, "web"); ok && rev == from {
					waiting = append(waiting, n)
				} else {
					turning = append(turning, n)
				}
			}
			if len(turning) > 0 && len(waiting) > 0 && last.at.After(start) {
				victim, busy = waiting[len(waiting)-1], last.at
				break
			}
			time.Sleep(podsEvery)
		}
		if victim == nil {
			return
		}
		d := victim.daemon("podmin-agent")
		restartAt = time.Now()
		if err := d.Stop(30 * time.Second); err != nil {
			restartErr = err
		}
		restartErr = r.startAgent(victim)
	})
	if victim == nil {
		p.Fatalf("no node was seen waiting while another replaced its Pod")
	}
	p.Figure("another node was replacing its Pod at %s; %s, still serving the old revision, had its agent restarted at %s",
		offset(busy, ro.start), victim.id, offset(restartAt, ro.start))
	if restartErr != nil {
		p.Errorf("the restarted agent: %v", restartErr)
	}
	r.report(p, ro, false)
}

// surge rolls a one-node NodeGroup whose DaemonSet asks maxSurge 1,
// once the manifest accepts it.
func (r *run) surge(p *e2enode.Proof) {
	r.surgeRollout(p)
}
