// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// serviceURL is the web Service as its clients name it.
const serviceURL = "https://web.default.svc.cluster.local/"

// service: the name resolves through the agent's DNS (directly and through
// CoreDNS, the Pods' resolver) to the VIP, and a Pod reaches the web Pod
// through the VIP, which nothing but the eBPF dataplane answers.
func (r *run) service(p *e2enode.Proof) {
	vip := service.Identity(cluster, "default", "web").VIP
	for _, server := range []string{"127.0.0.1:1053", net.JoinHostPort(nodeAddr.String(), "53")} {
		addrs, rcode, err := e2enode.Lookup(server, "web.default.svc.cluster.local")
		if err != nil || rcode != dns.RcodeSuccess || !slices.Equal(addrs, []netip.Addr{vip}) {
			p.Fatalf("%s answers %v (rcode %d, %v), want the VIP %s", server, addrs, rcode, err, vip)
		}
	}
	p.Figure("web.default.svc.cluster.local AAAA %s from the agent's DNS (127.0.0.1:1053) and through CoreDNS ([%s]:53)", vip, nodeAddr)
	if l := r.agent().LogText(); strings.Contains(l, "dataplane not loaded") {
		line := regexp.MustCompile(`.*dataplane not loaded.*`).FindString(l)
		p.NotRun("the VIP part: the agent did not load the eBPF dataplane: " + line)
	}
	route, err := exec.Command("ip", "-6", "route", "get", vip.String()).CombinedOutput()
	if err != nil || !strings.Contains(string(route), "via "+vpcAddr.String()) {
		p.Fatalf("the node routes the VIP %s otherwise than to its default gateway: %s %v", vip, route, err)
	}
	r.waitFor(p, time.Minute, "the probe Pod", func() bool {
		_, ip, ok := readyPod("probe")
		r.probe = ip
		return ok
	})
	r.waitFor(p, 30*time.Second, "the probe Pod to reach web through the VIP", func() bool {
		h, err := fetchFrom(r.probe, serviceURL, 0)
		return err == nil && h.Pod == staticName("web") && h.Version == "v1"
	})
	var took []time.Duration
	// Bare "web" resolves too, but is deliberately no name in the workload
	// certificate: it is relative to the client's namespace.
	for _, target := range []string{serviceURL, "https://web.default/"} {
		for range 10 {
			start := time.Now()
			h, err := fetchFrom(r.probe, target, 0)
			if err != nil || h.Pod != staticName("web") {
				p.Fatalf("%s from Pod probe: %+v, %v", target, h, err)
			}
			took = append(took, time.Since(start))
		}
	}
	slices.Sort(took)
	p.Figure("Pod probe %s → HTTPS to %s and https://web.default/: %d/%d answers from web (name resolved by the Pod through its search path, TLS verified with its mounted CA), median %s",
		r.probe, serviceURL, len(took), len(took), took[len(took)/2].Round(100*time.Microsecond))
	// The node's own connection leaves by eth0's egress, where no program
	// runs: without the dataplane nothing answers the VIP.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(vip.String(), "443"), time.Second); err == nil {
		c.Close()
		p.Fatalf("the VIP answers the node itself, past the dataplane")
	}
	p.Figure("the VIP answers only at the Pods' veths: the node routes %s to its default gateway and gets no answer there itself; TCX attachments: %d",
		vip, strings.Count(r.agent().LogText(), "msg=\"dataplane attached\""))
}

// sample is one answer, or failure, of the Service during the rollout.
type sample struct {
	at      time.Time
	version string
	err     error
	took    time.Duration // how long the call took
}

// rollout deploys hello:v2 while a Pod calls the Service every 50 ms, and
// reports the time to the first v2 answer and the longest time without
// an answer.
func (r *run) rollout(p *e2enode.Proof) {
	if !r.probe.IsValid() {
		p.NotRun("the probe Pod never reached the Service (proof 4)")
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			h, err := fetchFrom(r.probe, serviceURL, callTimeout)
			mu.Lock()
			samples = append(samples, sample{at: time.Now(), version: h.Version, err: err})
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second) // a baseline of v1 answers
	logStart := len(r.agent().LogText())
	start := time.Now()
	r.podmin("deploy", "web", "-g", nodegroup, "--image", "hello:v2", "--service", "--secret", "token")
	deployTook := time.Since(start)
	r.waitFor(p, 3*time.Minute, "two seconds of v2 answers only", func() bool {
		mu.Lock()
		defer mu.Unlock()
		var seen bool
		for i := len(samples) - 1; i >= 0 && time.Since(samples[i].at) < 2*time.Second; i-- {
			if samples[i].err != nil || samples[i].version != "v2" {
				return false
			}
			seen = true
		}
		return seen && time.Since(start) > 2*time.Second
	})
	cancel()
	<-done
	var firstV2, lastV1, prevOK time.Time
	var gap time.Duration
	var gapFrom time.Time
	failed, v1AfterV2 := 0, 0
	for _, s := range samples {
		if s.err != nil {
			failed++
			continue
		}
		if s.version == "v1" {
			lastV1 = s.at
			if !firstV2.IsZero() {
				v1AfterV2++
			}
		}
		if s.version == "v2" && firstV2.IsZero() {
			firstV2 = s.at
		}
		if !prevOK.IsZero() && s.at.Sub(prevOK) > gap {
			gap, gapFrom = s.at.Sub(prevOK), prevOK
		}
		prevOK = s.at
	}
	if firstV2.IsZero() {
		p.Fatal("the Service never answered with v2")
	}
	p.Figure("podmin deploy returned in %s; deploy → first v2 answer through the VIP: %s",
		deployTook.Round(10*time.Millisecond), firstV2.Sub(start).Round(10*time.Millisecond))
	p.Figure("longest time without an answer: %s (from %s after the deploy; last v1 answer → first v2 answer %s); %d of %d calls failed",
		gap.Round(10*time.Millisecond), gapFrom.Sub(start).Round(10*time.Millisecond), firstV2.Sub(lastV1).Round(10*time.Millisecond), failed, len(samples))
	if v1AfterV2 > 0 {
		p.Errorf("%d v1 answers after the first v2 answer", v1AfterV2)
	}
	steps, err := parseReplacement(r.daemon("containerd").LogText(), r.daemon("kubelet").LogText(), staticName("web"), start, time.Local)
	if err != nil {
		p.Fatal(err)
	}
	p.Figure("where the gap goes, from kubelet's and containerd's logs: %s", steps.describe(start))
	if !steps.oldStopped.IsZero() && !steps.newRequested.IsZero() && steps.newRequested.Before(steps.oldStopped) {
		p.Errorf("kubelet asked for the new sandbox before the old one had stopped")
	}
	// The agent removes the old file and writes the new one once the old
	// sandbox stopped, so kubelet starts the new version at once instead
	// of after its pod-worker back-off (10 s plus jitter).
	if steps.oldStopped.IsZero() || steps.newRequested.IsZero() || steps.newRequested.Sub(steps.oldStopped) > 5*time.Second {
		p.Errorf("kubelet asked for the new sandbox more than 5 s after the old one stopped (or either is not in the logs)")
	}
	l := r.agent().LogText()[logStart:]
	if !strings.Contains(l, `msg="static Pod file removed so that kubelet stops the running revision first"`) || strings.Contains(l, "could not see the running revision stop") {
		p.Errorf("the agent did not wait for the running revision to stop before writing its replacement:\n%s", l)
	}
	pulled := regexp.MustCompile(`msg="images pre-pulled before the Pods change".*apps/hello:v2.*duration=(\S+)`).FindStringSubmatch(l)
	written := strings.Index(l, `msg="static Pod written"`)
	if pulled == nil || written < 0 || strings.Index(l, pulled[0]) > written {
		p.Fatalf("the agent did not pre-pull hello:v2 before it wrote web.yaml:\n%s", l)
	}
	p.Figure("the agent pre-pulled hello:v2 in %s before it changed web.yaml", pulled[1])
	_, ip, ok := readyPod("web")
	if !ok {
		p.Fatal("no ready web Pod after the rollout")
	}
	r.web = ip
	p.Figure("the new Pod answers on %s", ip)
}

// callTimeout bounds each call of the rollout, so a call to a Service
// without a ready backend fails fast instead of hiding the gap's end.
const callTimeout = 400 * time.Millisecond
