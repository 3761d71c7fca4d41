// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// laterGroup is a NodeGroup without nodes: the one a rollout reaches after
// the real node's.
const laterGroup = "later"

// benchSamples is how many fresh deployments the commit → ready figure
// measures.
const benchSamples = 3

// deployWait rolls web back to hello:v1 with podmin deploy --wait while
// the test calls every web Pod kubelet lists on its Pod IP: the wait must
// return only after the new Pod answered, and the Pod must answer at the
// moment it returns.
func (r *run) deployWait(p *e2enode.Proof) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu          sync.Mutex
		firstAnswer time.Time
		firstIP     netip.Addr
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, ip := range podIPs("web") {
				if h, err := quickHello(ip); err == nil && h.Version == "v1" {
					mu.Lock()
					if firstAnswer.IsZero() {
						firstAnswer, firstIP = time.Now(), ip
					}
					mu.Unlock()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	out, err := r.podminErr(nil, "deploy", "web", "-g", nodegroup, "--image", "hello:v1", "--service", "--secret", "token",
		"--wait", "--timeout", "3m")
	returned := time.Since(start)
	// The Pod must answer now, at the first try.
	_, ip, ok := readyPod("web")
	var h hello
	var atReturn error
	if ok {
		h, atReturn = helloAt(ip)
	}
	cancel()
	<-done
	if err != nil {
		p.Fatalf("podmin deploy --wait: %v", err)
	}
	if !ok || atReturn != nil || h.Version != "v1" {
		p.Fatalf("podmin deploy --wait returned after %s, but the web Pod does not answer v1 then: ready Pod %v at %s, answer %+v, %v",
			returned.Round(10*time.Millisecond), ok, ip, h, atReturn)
	}
	if firstAnswer.IsZero() || !firstAnswer.Before(start.Add(returned)) {
		p.Fatalf("podmin deploy --wait returned %s after the deploy, before the test saw the new Pod answer (first v1 answer: %v)",
			returned.Round(10*time.Millisecond), firstAnswer)
	}
	r.web = ip
	failures, err := readinessFailures(r.daemon("kubelet").LogText(), staticName("web"), start, time.Local)
	if err != nil {
		p.Fatal(err)
	}
	p.Figure("podmin deploy --wait (hello:v2 → hello:v1) returned after %s; the new Pod %s first answered HTTP %s after the deploy, %s before the wait returned; at its return the Pod answered v1 at once",
		returned.Round(10*time.Millisecond), firstIP, firstAnswer.Sub(start).Round(10*time.Millisecond),
		start.Add(returned).Sub(firstAnswer).Round(10*time.Millisecond))
	if len(failures) > 0 {
		var at []string
		for _, f := range failures {
			at = append(at, "+"+f.Sub(start).Round(10*time.Millisecond).String())
		}
		p.Figure("kubelet's readiness probe (HTTPS /healthz, every 2 s) failed at %s after the deploy", strings.Join(at, ", "))
	}
	if m := regexp.MustCompile(`(?m)^.*revision \S+ ready on .*$`).FindString(out); m != "" {
		p.Figure("it printed %q", m)
	} else {
		p.Fatalf("podmin deploy --wait printed no ready line:\n%s", out)
	}
}

// benchmark measures, on fresh deployments, commit → podmin status shows
// the deployment ready, and how much of it comes after kubelet's Pods API
// said ready.
func (r *run) benchmark(p *e2enode.Proof) {
	var total, afterKubelet, deploys []time.Duration
	calls, polled := 0, time.Duration(0)
	for i := 1; i <= benchSamples; i++ {
		name := fmt.Sprintf("bench%d", i)
		ctx, cancel := context.WithCancel(context.Background())
		w := r.observe(ctx, name)
		start := time.Now()
		r.podmin("deploy", name, "-g", nodegroup, "--image", "hello:v1")
		r.extra = append(r.extra, [2]string{nodegroup, name})
		committed := time.Now()
		var ready time.Time
		r.waitFor(p, 2*time.Minute, name+" ready in podmin status", func() bool {
			calls++
			began := time.Now()
			st, err := r.status(nodegroup, name)
			polled += time.Since(began)
			if err != nil {
				p.Fatalf("podmin status %s -g %s: %v", name, nodegroup, err)
			}
			ready = time.Now()
			return st == "ready"
		})
		cancel()
		kubelet := w.first()
		if kubelet.IsZero() || kubelet.After(ready) {
			p.Fatalf("%s: podmin status showed ready at %s, but the Pods API had not said ready before (%v)", name, ready.Format(time.TimeOnly), kubelet)
		}
		// These Pods have no readiness probe: ready must wait for the hold
		// (less the few milliseconds between the agent's and this
		// watcher's sight of kubelet's word).
		if d := ready.Sub(kubelet); d < coordinator.ProbelessHold-100*time.Millisecond {
			p.Fatalf("%s has no readiness probe, but podmin status showed it ready %s after the Pods API said ready, before the %s hold", name, d, coordinator.ProbelessHold)
		}
		deploys = append(deploys, committed.Sub(start))
		total = append(total, ready.Sub(committed))
		afterKubelet = append(afterKubelet, ready.Sub(kubelet))
	}
	for i := 1; i <= benchSamples; i++ {
		r.forget(p, nodegroup, fmt.Sprintf("bench%d", i))
	}
	round := func(ds []time.Duration) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Round(10*time.Millisecond).String())
		}
		return out
	}
	p.Figure("commit (podmin deploy returned) → podmin status shows ready, %d fresh deployments, local store, real kubelet: %s (median %s)",
		benchSamples, strings.Join(round(total), ", "), median(total).Round(10*time.Millisecond))
	p.Figure("of which after kubelet's Pods API said ready (the %s a Pod without a readiness probe must stay ready, as these have no Service; agent report → leader's status object → podmin status): %s (median %s); podmin deploy took %s; podmin status polled back to back, %d calls of %s each on average",
		coordinator.ProbelessHold,
		strings.Join(round(afterKubelet), ", "), median(afterKubelet).Round(10*time.Millisecond), strings.Join(round(deploys), ", "),
		calls, (polled / time.Duration(max(calls, 1))).Round(time.Millisecond))
}

// brokenWait deploys hello:broken, whose command exits with status 3, with
// a Service (so with a readiness probe, as web has): podmin deploy --wait
// must fail with exit status 1 and kubelet's account of the failure, long
// before its timeout. Without a readiness probe kubelet reports a container
// ready as soon as it starts, and one that exits a second later can pass
// the wait before kubelet reports it crashing.
func (r *run) brokenWait(p *e2enode.Proof) {
	const timeout = 2 * time.Minute
	start := time.Now()
	_, err := r.podminErr(nil, "deploy", "broken", "-g", nodegroup, "--image", "hello:broken", "--service",
		"--wait", "--timeout", timeout.String())
	took := time.Since(start)
	r.extra = append(r.extra, [2]string{nodegroup, "broken"})
	defer r.forget(p, nodegroup, "broken")
	code := exitCode(err)
	if code != 1 {
		p.Fatalf("podmin deploy --wait of hello:broken: exit status %d after %s, want 1: %v", code, took.Round(10*time.Millisecond), err)
	}
	line := nodeError(err.Error())
	if line == "" {
		p.Fatalf("podmin deploy --wait of hello:broken exited 1 without the node's error (the exit status 3 kubelet reports):\n%v", err)
	}
	if took >= timeout {
		p.Fatalf("it failed after %s, not within its timeout %s", took, timeout)
	}
	p.Figure("podmin deploy --wait --timeout %s of hello:broken exited 1 after %s with the node's error: %q", timeout, took.Round(10*time.Millisecond), line)
	for _, pod := range podsNamed(staticName("broken")) {
		for _, c := range pod.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				p.Figure("kubelet then: container %s waiting (%s), %d restart(s)", c.Name, w.Reason, c.RestartCount)
			}
		}
	}
}

// brokenWaitProbeless deploys hello:broken without a Service, so without a
// readiness probe: kubelet reports its container ready as soon as it
// starts, until it exits a moment later. podmin deploy --wait must still
// fail, with the node's error (exit status 1) or with what is missing at
// its timeout (124), never succeed: a Pod without a readiness probe counts
// as ready only once kubelet has reported it ready for the hold.
func (r *run) brokenWaitProbeless(p *e2enode.Proof) {
	const timeout = 2 * time.Minute
	start := time.Now()
	_, err := r.podminErr(nil, "deploy", "brokenbare", "-g", nodegroup, "--image", "hello:broken",
		"--wait", "--timeout", timeout.String())
	took := time.Since(start)
	r.extra = append(r.extra, [2]string{nodegroup, "brokenbare"})
	defer r.forget(p, nodegroup, "brokenbare")
	switch code := exitCode(err); code {
	case 1:
		line := nodeError(err.Error())
		if line == "" {
			p.Fatalf("podmin deploy --wait of hello:broken without a probe exited 1 without the node's error (the exit status 3 kubelet reports):\n%v", err)
		}
		p.Figure("podmin deploy --wait --timeout %s of hello:broken without a Service (no readiness probe) exited 1 after %s with the node's error: %q",
			timeout, took.Round(10*time.Millisecond), line)
	case 124:
		p.Figure("podmin deploy --wait --timeout %s of hello:broken without a Service (no readiness probe) exited 124 after %s: %v",
			timeout, took.Round(10*time.Millisecond), err)
	default:
		p.Fatalf("podmin deploy --wait of hello:broken without a readiness probe: exit status %d after %s, want 1 or 124: %v", code, took.Round(10*time.Millisecond), err)
	}
	if took >= timeout+30*time.Second {
		p.Fatalf("it failed after %s, long past its timeout %s", took, timeout)
	}
	for _, pod := range podsNamed(staticName("brokenbare")) {
		for _, c := range pod.Spec.Containers {
			if c.ReadinessProbe != nil {
				p.Fatalf("the Pod's container %s has a readiness probe: the proof needs one without", c.Name)
			}
		}
		for _, c := range pod.Status.ContainerStatuses {
			p.Figure("kubelet then: container %s, %d restart(s), state %s", c.Name, c.RestartCount, containerState(c.State))
		}
	}
}

// containerState names a container's state as kubectl does.
func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting (" + s.Waiting.Reason + ")"
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated (%s, exit code %d)", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "unknown"
}

// rolloutRecipe runs recipes/rollout.star with hello:broken (and a Service,
// for its readiness probe) over the real node's NodeGroup, the canary,
// then NodeGroup later, which already holds the deployment at hello:v1:
// the recipe must stop at the canary with the node's error and leave
// later's index entry as it was.
func (r *run) rolloutRecipe(p *e2enode.Proof) {
	recipe, err := filepath.Abs("../../../recipes/rollout.star")
	if err != nil {
		p.Fatal(err)
	}
	r.podmin("deploy", "app", "-g", laterGroup, "--image", "hello:v1")
	r.extra = append(r.extra, [2]string{laterGroup, "app"})
	defer r.forget(p, laterGroup, "app")
	before := r.entry(p, laterGroup, "app")
	start := time.Now()
	out, err := r.podminErr(nil, "run", recipe, "--", "--image=hello:broken", "--name=app", "--service",
		"--nodegroups="+nodegroup, "--nodegroups="+laterGroup, "--timeout=2m")
	took := time.Since(start)
	r.extra = append(r.extra, [2]string{nodegroup, "app"})
	defer r.forget(p, nodegroup, "app")
	if strings.Contains(out+fmt.Sprint(err), laterGroup+"/app revision") {
		p.Errorf("the recipe went on to NodeGroup %s:\n%s%v", laterGroup, out, err)
	}
	if code := exitCode(err); code != 1 {
		p.Fatalf("podmin run rollout.star: exit status %d after %s, want 1 (the canary's node error): %v\n%s", code, took.Round(10*time.Millisecond), err, out)
	}
	line := nodeError(err.Error())
	if line == "" {
		p.Fatalf("the recipe stopped without the canary node's error:\n%v", err)
	}
	canary := r.entry(p, nodegroup, "app")
	if canary == nil {
		p.Fatalf("the canary NodeGroup %s holds no deployment app after the recipe", nodegroup)
	}
	if obj, err := local.Open(r.bucket).Get(context.Background(), canary.Pod, objstore.GetOptions{}); err != nil ||
		!strings.Contains(string(obj.Data), "hello:broken") {
		p.Fatalf("%s/app's Pod %s is not hello:broken's (%v)", nodegroup, canary.Pod, err)
	}
	after := r.entry(p, laterGroup, "app")
	if after == nil || *after != *before {
		p.Fatalf("the recipe changed %s/app although the canary failed: %v → %v", laterGroup, before, after)
	}
	p.Figure("podmin run rollout.star (hello:broken to %s, then %s) exited 1 after %s at the canary: %q",
		nodegroup, laterGroup, took.Round(10*time.Millisecond), line)
	p.Figure("%s/app's index entry unchanged (Pod payload %.12s…); %s/app holds hello:broken", laterGroup, filepath.Base(before.Pod), nodegroup)
}

// forget deletes a deployment a proof made, without waiting for the node
// (the last proof waits until nothing is left). r.extra keeps it for the
// last proof too, should this delete fail.
func (r *run) forget(p *e2enode.Proof, nodegroup, name string) {
	if _, err := r.podminErr(nil, "delete", name, "-g", nodegroup, "-y", "--ignore-not-found"); err != nil {
		p.Errorf("podmin delete %s -g %s: %v", name, nodegroup, err)
	}
}

// entry reads nodegroup/name's index entry from the bucket, nil when there
// is none.
func (r *run) entry(p *e2enode.Proof, nodegroup, name string) *state.Entry {
	ix, _, err := state.ReadIndex(context.Background(), local.Open(r.bucket))
	if err != nil {
		p.Fatalf("read the index: %v", err)
	}
	key, err := state.NewKey(nodegroup, name)
	if err != nil {
		p.Fatal(err)
	}
	e, ok := ix.Lookup(key)
	if !ok {
		return nil
	}
	return &e
}

// status is a deployment's state in podmin status -o json.
func (r *run) status(nodegroup, name string) (string, error) {
	out, err := r.podminErr(nil, "status", name, "-g", nodegroup, "-o", "json")
	if err != nil {
		return "", err
	}
	var doc struct {
		NodeGroups []struct {
			Deployments []struct {
				Name, State string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return "", fmt.Errorf("%w: %s", err, out)
	}
	for _, g := range doc.NodeGroups {
		for _, d := range g.Deployments {
			if d.Name == name {
				return d.State, nil
			}
		}
	}
	return "", fmt.Errorf("no deployment %s in %s", name, out)
}

// nodeError is the line of a podmin error that carries kubelet's account
// of hello:broken's exit.
func nodeError(s string) string {
	return regexp.MustCompile(`(?m)^.*(?:exit code|exited with code) 3\b.*$`).FindString(s)
}

// exitCode is a podmin run's exit status: 0 without an error, -1 when it
// did not exit.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// podsNamed are the Pods kubelet lists under a name.
func podsNamed(name string) []*corev1.Pod {
	ps, _ := e2enode.ListPods(podsAPISock)
	var out []*corev1.Pod
	for _, p := range ps {
		if p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

// podIPs are the addresses of the Pods of a DaemonSet kubelet lists, ready
// or not.
func podIPs(name string) []netip.Addr {
	var out []netip.Addr
	for _, p := range podsNamed(staticName(name)) {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// quickClient fails a call to a Pod that does not answer within 250 ms,
// so a poll keeps its pace.
var quickClient = &http.Client{Timeout: 250 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}

// quickHello reads a Pod's answer on its Pod IP within 250 ms.
func quickHello(ip netip.Addr) (hello, error) {
	var h hello
	resp, err := quickClient.Get(podURL(ip, "/"))
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("%s", resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// first is when the watch first saw any Pod of its name ready.
func (w *watch) first() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out time.Time
	for _, t := range w.readyAt {
		if out.IsZero() || t.Before(out) {
			out = t
		}
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
