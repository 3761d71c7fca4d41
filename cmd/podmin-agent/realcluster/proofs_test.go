// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/objstore"
)

// run is the state the proofs share.
type run struct {
	*cluster
	// plain is proof 2's rollout duration, proof 3's yardstick.
	plain time.Duration
	// rollouts counts the rollouts done; ports are proof 5's first
	// connections, made before the first.
	rollouts int
	ports    []shot
	portsAt  time.Time
}

// runProofs runs the proofs in order; each reports PASS, FAIL or NOT RUN
// with its figures. The outer test reports proof 7.
func (c *cluster) runProofs() {
	r := &run{cluster: c}
	proofs := []struct {
		num, title string
		fn         func(*e2enode.Proof)
	}{
		{"1", "the nodes are up with one leader; every node's DNS and every Pod resolve the Service, whose VIP answers from every Pod", r.up},
		{"2", "a maxUnavailable 1 rollout under a fixed-rate client fails no request and never has two nodes between revisions", r.plainRollout},
		{"3", "the same with the leader's agent SIGKILLed at +8 s: no request fails, and it takes at most 1.5 times as long", r.leaderKilled},
		{"4", "the same with a waiting node's agent restarted mid-rollout: never two nodes between revisions", r.waitingRestarted},
		{"4b", "a one-node NodeGroup rolled with maxSurge 1: no request fails and a ready Pod serves at every moment", r.surge},
		{"5", "after three rollouts, connections from explicitly reused client source ports all answer", r.reusedPorts},
		{"6", "a lost node's endpoints leave every node's dataplane within the bound, requests after it all answer, and podmin status names the node", r.nodeLost},
	}
	c.rep.Count(len(proofs) + 1)
	for _, p := range proofs {
		c.rep.Prove(c.t, p.num, p.title, p.fn)
	}
}

// liveEvery are the nodes of every NodeGroup not lost.
func (c *cluster) liveEvery() []*node {
	var out []*node
	for _, n := range c.allNodes() {
		n.mu.Lock()
		lost := n.lost
		n.mu.Unlock()
		if !lost {
			out = append(out, n)
		}
	}
	return out
}

// liveNodes are the nodes of NodeGroup group not lost.
func (c *cluster) liveNodes(group string) []*node {
	var out []*node
	for _, n := range c.allNodes() {
		n.mu.Lock()
		lost := n.lost
		n.mu.Unlock()
		if n.group == group && !lost {
			out = append(out, n)
		}
	}
	return out
}

func ids(nodes []*node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.id)
	}
	return out
}

// healthGet GETs path from node n's agent health endpoint (loopback in
// the node's namespace).
func (n *node) healthGet(path string) (int, string, error) {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return n.h.dial(ctx, network, addr, netip.Addr{}, 0)
		}}}
	resp, err := client.Get("http://127.0.0.1:8082" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// leader reads the lease in the bucket.
func (c *cluster) leader() (election.Record, error) {
	var rec election.Record
	obj, err := c.store.Get(context.Background(), election.Key, objstore.GetOptions{})
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(obj.Data, &rec)
}

// servingAll reports whether every node of nodes runs a ready web Pod,
// asking kubelet's Pods API directly.
func servingAll(nodes []*node, svc string) bool {
	for _, n := range nodes {
		ps, err := e2enode.ListPods(n.cfg.HostPath(e2enode.PodsAPISock))
		if err != nil {
			return false
		}
		ok := false
		for _, p := range ps {
			if p.Annotations["podmin.dev/service"] == svc && pods.IsReady(p) && p.DeletionTimestamp == nil {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// up deploys web with the CLI and proves the cluster serves it: one
// leader, the name answered by every node's DNS and from inside every
// Pod, the VIP answering from every Pod through every node.
func (r *run) up(p *e2enode.Proof) {
	nodes := r.liveNodes(workers)
	start := time.Now()
	if _, err := r.podmin(nil, "deploy", "web", "-g", workers, "--image", "hello:v1", "--service", "--secret", "token", "--wait", "--timeout", "5m"); err != nil {
		p.Fatal(err)
	}
	waited := time.Since(start)
	r.waitFor(p, 2*time.Minute, "a ready web Pod on every node", func() bool { return servingAll(nodes, "web") })
	p.Figure("podmin deploy --wait of web (hello:v1, a Service) returned after %s; a ready web Pod on each of the %d nodes %s after the deploy",
		waited.Round(10*time.Millisecond), len(nodes), time.Since(start).Round(10*time.Millisecond))
	if err := r.loadTrust(); err != nil {
		p.Fatal(err)
	}

	// One leader: the lease names a node, and exactly that node's agent
	// says it leads.
	rec, err := r.leader()
	if err != nil {
		p.Fatalf("the lease %s: %v", election.Key, err)
	}
	var leaders []string
	for _, n := range nodes {
		_, body, err := n.healthGet("/metrics")
		if err != nil {
			p.Fatalf("%s's agent metrics: %v", n.id, err)
		}
		if regexp.MustCompile(`(?m)^podmin_agent_leader(\{[^}]*\})? 1$`).MatchString(body) {
			leaders = append(leaders, n.id)
		}
	}
	if len(leaders) != 1 || leaders[0] != rec.LeaderID {
		p.Fatalf("the lease names %q; the agents leading by their metrics: %v", rec.LeaderID, leaders)
	}
	p.Figure("one leader: %s (the lease in %s and its agent's podmin_agent_leader; the others' are 0)", rec.LeaderID, election.Key)

	// Every node's DNS answers the name with the VIP, as the node's Pods
	// ask it; every Pod reaches the Service by name.
	vip := service.Identity(clusterID, "default", "web").VIP
	for _, n := range nodes {
		var addrs []netip.Addr
		var rcode int
		err := r.client.do(func() error {
			var err error
			addrs, rcode, err = e2enode.Lookup(net.JoinHostPort(n.cfg.Addr.String(), "53"), "web.default.svc.cluster.local")
			return err
		})
		if err != nil || rcode != dns.RcodeSuccess || !slices.Equal(addrs, []netip.Addr{vip}) {
			p.Fatalf("%s's DNS answers web.default.svc.cluster.local with %v (rcode %d, %v), want the VIP %s", n.id, addrs, rcode, err, vip)
		}
	}
	p.Figure("web.default.svc.cluster.local AAAA %s from the DNS of each node (CoreDNS at the node's address)", vip)
	var fromPods []string
	for _, n := range nodes {
		ip := servingIP(n, "web")
		for _, target := range []string{"https://web.default.svc.cluster.local/", "https://web.default/"} {
			h, err := fetchFrom(ip, target)
			if err != nil {
				p.Fatalf("the web Pod of %s (%s) GET %s: %v", n.id, ip, target, err)
			}
			fromPods = append(fromPods, fmt.Sprintf("%s→%s", n.id, h.Pod))
		}
	}
	p.Figure("from inside each node's web Pod, https://web.default.svc.cluster.local/ and https://web.default/ (its resolver, its search path, TLS verified with its mounted CA) answer: %s",
		strings.Join(fromPods, ", "))

	// New connections through every node reach every Pod.
	l := &load{c: r.cluster, name: "web.default.svc.cluster.local", vip: vip}
	answered := map[string]int{}
	failed := 0
	for i := range 20 * len(nodes) {
		kind := kindVIP
		if i%2 == 1 {
			kind = kindName
		}
		s := l.newConnection(kind, nodes[i%len(nodes)], 0)
		if s.err != nil {
			failed++
			p.Errorf("%s via %s: %v", kind, s.entry, s.err)
			continue
		}
		answered[s.pod]++
	}
	var tally []string
	for _, n := range nodes {
		pod := "web-" + n.id
		tally = append(tally, fmt.Sprintf("%s %d", pod, answered[pod]))
		if answered[pod] == 0 {
			p.Errorf("the VIP never answered from %s", pod)
		}
	}
	p.Figure("%d new HTTPS connections through the %d nodes (VIP and name in turn): %d failed; answers by Pod: %s",
		20*len(nodes), len(nodes), failed, strings.Join(tally, ", "))
	r.idle(p)

	// Proof 5's first connections, before any rollout.
	r.portsAt = time.Now()
	for i := range reusedPorts {
		n := nodes[i%len(nodes)]
		s := l.newConnection(kindPort, n, firstReusedPort+i)
		// The backend the flow went to, to tell in proof 5 whether the
		// same port is sent there again.
		s.backend = flowBackend(n, clientAddr(n.i), l.vip, firstReusedPort+i)
		r.ports = append(r.ports, s)
	}
	r.pods = startPodSampler(r.allNodes)
	r.planes = startPlaneSampler(r.liveEvery, r.podPrefixes)
}

// podPrefixes are the Pod prefixes of every node.
func (c *cluster) podPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, n := range c.allNodes() {
		out = append(out, n.cfg.PodPrefix)
	}
	return out
}

// servingIP is the address of node n's ready Pod of svc, or the zero
// address.
func servingIP(n *node, svc string) netip.Addr {
	ps, err := e2enode.ListPods(n.cfg.HostPath(e2enode.PodsAPISock))
	if err != nil {
		return netip.Addr{}
	}
	for _, p := range ps {
		if p.Annotations["podmin.dev/service"] == svc && pods.IsReady(p) && p.DeletionTimestamp == nil {
			a, _ := netip.ParseAddr(p.Status.PodIP)
			return a
		}
	}
	return netip.Addr{}
}

// fetchFrom makes the Pod at ip GET target from inside itself (the
// workload's /fetch) and returns the answer.
func fetchFrom(ip netip.Addr, target string) (e2enode.Hello, error) {
	var h e2enode.Hello
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + net.JoinHostPort(ip.String(), "8080") + "/fetch?" + url.Values{"url": {target}}.Encode())
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var f struct {
		Status int
		Body   string
		Error  string
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return h, fmt.Errorf("%s: %s", resp.Status, b)
	}
	if f.Status != http.StatusOK {
		return h, fmt.Errorf("answered %d %s%s", f.Status, f.Body, f.Error)
	}
	return h, json.Unmarshal([]byte(f.Body), &h)
}

// Proof 5's ports: reusedPorts source ports from firstReusedPort, below
// the ephemeral range and the nodes' source-NAT range, spread over the
// entry nodes.
const (
	reusedPorts     = 100
	firstReusedPort = 20000
)

// reusedPorts connects again from the source ports proof 1 used, through
// the same nodes, after the rollouts: every flow's old backend is gone,
// so a dataplane that keeps a closed flow's backend for a new SYN fails.
func (r *run) reusedPorts(p *e2enode.Proof) {
	if len(r.ports) == 0 {
		p.NotRun("proof 1 made no first connections")
	}
	before := map[string]int{}
	failedBefore := 0
	for _, s := range r.ports {
		if s.err != nil {
			failedBefore++
		} else {
			before[s.pod]++
		}
	}
	p.Figure("before any rollout: %d connections from ports %d–%d through %s: %d failed; answered by %v",
		len(r.ports), firstReusedPort, firstReusedPort+reusedPorts-1, strings.Join(ids(r.liveNodes(workers)), ", "), failedBefore, before)
	if r.rollouts < 3 {
		p.Figure("only %d rollout(s) ran since (proofs 2–4): the old backends may still live", r.rollouts)
	}
	l := &load{c: r.cluster, name: "web.default.svc.cluster.local", vip: service.Identity(clusterID, "default", "web").VIP}
	byID := map[string]*node{}
	for _, n := range r.allNodes() {
		byID[n.id] = n
	}
	start := time.Now()
	var again []shot
	stale := 0
	for _, first := range r.ports {
		s := l.newConnection(kindPort, byID[first.entry], first.sport)
		again = append(again, s)
		if s.err != nil && s.backend.IsValid() && s.backend == first.backend {
			stale++
		}
	}
	t := tallyShots(again, start, time.Now().Add(time.Second))
	p.Figure("after %d rollouts: %d of %d connections from the same ports through the same nodes answered (by %v)",
		r.rollouts, t.sent-t.failed, t.sent, t.pods)
	if t.failed > 0 {
		name := podNamer(r.pods.snapshot(), start)
		p.Errorf("%d of %d connections from reused ports failed; %d of them were sent to the very Pod address their port had reached before the rollouts; where the dataplanes sent them: %s; first: %s",
			t.failed, t.sent, stale, t.backendsOfFailures(name), t.failureList(start, 6, name, r.planes.snapshot()))
	}
}
