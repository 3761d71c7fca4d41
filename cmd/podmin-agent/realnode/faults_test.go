// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// faultCallTimeout bounds each call of the fault proofs: a client's
// patience, not the rollout proof's tight bound that times the gap.
const faultCallTimeout = 2 * time.Second

// calls is the Service as a client sees it: the probe Pod calls it by name
// (resolved through the node's DNS) and so through the VIP, on a new
// connection every pace, until stop.
type calls struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []sample
}

// callService starts calling the web Service by name from the probe Pod.
func (r *run) callService(pace time.Duration) *calls { return r.callTarget(pace, serviceURL, "") }

// callVIP starts calling the web Service at its VIP from the probe Pod:
// the dataplane without the node's DNS.
func (r *run) callVIP(pace time.Duration) *calls {
	vip := service.Identity(cluster, "default", "web").VIP
	return r.callTarget(pace, "https://"+net.JoinHostPort(vip.String(), "443")+"/", "web.default.svc.cluster.local")
}

// callTarget starts calling target from the probe Pod, verifying the
// server as servername ("": the target's host).
func (r *run) callTarget(pace time.Duration, target, servername string) *calls {
	ctx, cancel := context.WithCancel(context.Background())
	c := &calls{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			began := time.Now()
			h, err := fetchFromAs(r.probe, target, servername, faultCallTimeout)
			c.mu.Lock()
			c.samples = append(c.samples, sample{at: time.Now(), version: h.Version, err: err, took: time.Since(began)})
			c.mu.Unlock()
			time.Sleep(pace)
		}
	}()
	return c
}

// stop ends the calls and returns them.
func (c *calls) stop() []sample {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.samples
}

// slowest is the longest call that answered.
func slowest(samples []sample) time.Duration {
	var d time.Duration
	for _, s := range samples {
		if s.err == nil {
			d = max(d, s.took)
		}
	}
	return d
}

// tally counts the failed calls and the longest time between two answers
// (or from the first call), with the first failure's error.
func tally(samples []sample) (failed int, gap time.Duration, firstErr error) {
	var prev time.Time
	if len(samples) > 0 {
		prev = samples[0].at
	}
	for _, s := range samples {
		if s.err != nil {
			failed++
			if firstErr == nil {
				firstErr = s.err
			}
			continue
		}
		gap = max(gap, s.at.Sub(prev))
		prev = s.at
	}
	return failed, gap, firstErr
}

// unpullable rolls web to an image that was never pushed: the node must
// keep the running revision serving, podmin deploy --wait must fail with
// the node's account of the pull, and the old deployment must come back
// with one more deploy.
func (r *run) unpullable(p *e2enode.Proof) {
	if !r.probe.IsValid() {
		p.NotRun("the probe Pod never reached the Service (proof 4)")
	}
	_, before, ok := readyPod("web")
	if !ok {
		p.Fatal("no ready web Pod to begin with")
	}
	c := r.callService(50 * time.Millisecond)
	time.Sleep(time.Second)
	start := time.Now()
	_, err := r.podminErr(nil, "deploy", "web", "-g", nodegroup, "--image", "hello:never-pushed", "--service", "--secret", "token",
		"--wait", "--timeout", "2m")
	took := time.Since(start)
	time.Sleep(2 * time.Second) // the node keeps trying: it must keep serving meanwhile
	samples := c.stop()
	failed, gap, firstErr := tally(samples)
	if code := exitCode(err); code != 1 {
		p.Fatalf("podmin deploy --wait of a never-pushed image: exit status %d after %s, want 1: %v", code, took.Round(10*time.Millisecond), err)
	}
	line := regexp.MustCompile(`(?m)^.*image error: .*cannot be pulled.*$`).FindString(err.Error())
	if line == "" || !strings.Contains(line, "keeps serving") {
		p.Fatalf("podmin deploy --wait exited 1 without the node's image error:\n%v", err)
	}
	p.Figure("podmin deploy --wait of hello:never-pushed exited 1 after %s with %q", took.Round(10*time.Millisecond), line)
	if failed > 0 {
		p.Errorf("%d of %d calls to the Service failed meanwhile (first: %v)", failed, len(samples), firstErr)
	}
	_, after, ok := readyPod("web")
	if !ok || after != before {
		p.Errorf("the running web Pod changed: %s before, %s (ready %v) after", before, after, ok)
	}
	p.Figure("the running revision kept serving: %d/%d calls through the VIP by name answered, longest gap %s; the Pod %s still runs",
		len(samples)-failed, len(samples), gap.Round(10*time.Millisecond), after)
	// The good image again: the node runs it already, so the wait ends
	// at once.
	start = time.Now()
	if _, err := r.podminErr(nil, "deploy", "web", "-g", nodegroup, "--image", "hello:v1", "--service", "--secret", "token", "--wait", "--timeout", "2m"); err != nil {
		p.Fatalf("podmin deploy --wait back to hello:v1: %v", err)
	}
	p.Figure("podmin deploy --wait back to hello:v1 returned after %s", time.Since(start).Round(10*time.Millisecond))
}

// probeNamed deploys a Service whose readiness probe targets a port the
// workload does not serve: podmin deploy --wait must end at its timeout
// naming the probe, its address and port, and its answer.
func (r *run) probeNamed(p *e2enode.Proof) {
	const timeout = 40 * time.Second
	start := time.Now()
	_, err := r.podminErr(nil, "deploy", "unready", "-g", nodegroup, "--image", "hello:v1", "--service", "--port", "443:9000",
		"--wait", "--timeout", timeout.String())
	took := time.Since(start)
	r.extra = append(r.extra, [2]string{nodegroup, "unready"})
	defer r.forget(p, nodegroup, "unready")
	if code := exitCode(err); code != 124 {
		p.Fatalf("podmin deploy --wait of a Service whose probe fails: exit status %d after %s, want 124 (its timeout): %v", code, took.Round(10*time.Millisecond), err)
	}
	line := regexp.MustCompile(`(?m)^.*readiness probe TCP connect to \[[0-9a-f:]+\]:9000 fails: connection refused.*$`).FindString(err.Error())
	if line == "" {
		p.Fatalf("podmin deploy --wait timed out without naming the failing probe:\n%v", err)
	}
	p.Figure("podmin deploy --wait --timeout %s exited 124 after %s naming the probe: %q", timeout, took.Round(10*time.Millisecond), line)
}

// deleteRedeploy deletes a running deployment, waits until kubelet stopped
// it, and deploys the same name again: it must start again, with its
// workload identity and its values mounted.
func (r *run) deleteRedeploy(p *e2enode.Proof) {
	if _, err := r.podminErr([]byte(r.secret), "secret", "create", "token", "--for", "again", "--stdin"); err != nil {
		p.Fatalf("podmin secret create token --for again: %v", err)
	}
	r.extra = append(r.extra, [2]string{nodegroup, "again"})
	defer r.forget(p, nodegroup, "again")
	if _, err := r.podminErr(nil, "deploy", "again", "-g", nodegroup, "--image", "hello:v1", "--secret", "token", "--wait", "--timeout", "2m"); err != nil {
		p.Fatalf("podmin deploy --wait again: %v", err)
	}
	start := time.Now()
	if _, err := r.podminErr(nil, "delete", "again", "-g", nodegroup, "-y"); err != nil {
		p.Fatalf("podmin delete again: %v", err)
	}
	r.waitFor(p, 2*time.Minute, "kubelet to stop the deleted Pod", func() bool { return len(podsNamed(staticName("again"))) == 0 })
	gone := time.Since(start)
	workload := r.root + "/run/podmin/workloads/again"
	if _, err := os.Lstat(workload); !os.IsNotExist(err) {
		p.Fatalf("the deleted Pod's workload directory %s: %v, want it removed", workload, err)
	}
	start = time.Now()
	if _, err := r.podminErr(nil, "deploy", "again", "-g", nodegroup, "--image", "hello:v1", "--secret", "token",
		"--wait", "--timeout", "2m"); err != nil {
		p.Fatalf("podmin deploy --wait of the deleted name: %v", err)
	}
	back := time.Since(start)
	var ip = podIPs("again")
	if len(ip) != 1 {
		p.Fatalf("kubelet runs %d Pods of again after the deploy", len(ip))
	}
	for _, f := range []string{"/var/run/secrets/podmin.dev/tls/tls.crt", "/var/run/podmin/local/token"} {
		if _, err := get(podURL(ip[0], "/read?path="+f)); err != nil {
			p.Fatalf("the redeployed Pod reads %s: %v", f, err)
		}
	}
	p.Figure("podmin delete → Pod gone in %s (its workload directory removed); podmin deploy --wait of the same name → ready in %s, reading its identity and its value", gone.Round(10*time.Millisecond), back.Round(10*time.Millisecond))
}

// agentRestart SIGKILLs the agent while the probe Pod calls the Service
// by name and at its VIP and the node's CoreDNS is asked the Service's
// name, restarts it after 5 s (the systemd unit's RestartSec), and counts
// what failed: the dataplane and the node's DNS must outlive the agent.
func (r *run) agentRestart(p *e2enode.Proof) {
	if !r.probe.IsValid() {
		p.NotRun("the probe Pod never reached the Service (proof 4)")
	}
	byName, byVIP := r.callService(50*time.Millisecond), r.callVIP(50*time.Millisecond)
	names := r.askDNS(50 * time.Millisecond)
	time.Sleep(2 * time.Second)
	old := r.agent()
	killed := time.Now()
	must(p.T, old.Cmd.Process.Signal(syscall.SIGKILL))
	<-old.Done()
	r.forgetDaemon(old)
	time.Sleep(5 * time.Second)
	restarted := time.Now()
	r.startAgent()
	up := time.Since(restarted)
	// Some calls after the new agent took over: its first snapshot must
	// not darken the Service either.
	time.Sleep(10 * time.Second)
	for _, c := range []struct {
		what    string
		samples []sample
	}{{"calls by name (DNS and VIP)", byName.stop()}, {"calls to the VIP", byVIP.stop()}, {"CoreDNS lookups of the name and its first search-list form", names.stop()}} {
		failed, gap, firstErr := tally(c.samples)
		var during int
		var at, slow []string
		for _, s := range c.samples {
			if s.at.After(killed) && s.at.Before(restarted.Add(up)) {
				during++
			}
			if s.err != nil {
				at = append(at, fmt.Sprintf("%+.2fs", s.at.Sub(killed).Seconds()))
			} else if s.took > 500*time.Millisecond {
				slow = append(slow, fmt.Sprintf("%s ending %+.2fs", s.took.Round(10*time.Millisecond), s.at.Sub(killed).Seconds()))
			}
		}
		p.Figure("%s: %d (%d while no agent ran), %d failed, longest time without an answer %s, slowest %s",
			c.what, len(c.samples), during, failed, gap.Round(10*time.Millisecond), slowest(c.samples).Round(time.Millisecond))
		if len(slow) > 0 {
			p.Figure("%s slower than 500 ms (times from the kill; the agent restarted at %+.2fs): %s", c.what, restarted.Sub(killed).Seconds(), strings.Join(slow, ", "))
		}
		if failed > 0 {
			p.Errorf("%s: %d of %d failed, at %s from the kill (restarted at %+.2fs); first: %v",
				c.what, failed, len(c.samples), strings.Join(at, ", "), restarted.Sub(killed).Seconds(), firstErr)
		}
	}
	p.Figure("agent SIGKILLed, restarted 5 s later, serving again %s after its start", up.Round(10*time.Millisecond))
	if drops := dataplaneDrops(); drops != "" {
		p.Figure("the dataplane's drops since it was loaded (its maps outlive the agent): %s", drops)
	}
	if l := r.agent().LogText(); strings.Contains(l, "dataplane adopted") {
		p.Figure("the new agent adopted the pinned dataplane: %q", regexp.MustCompile(`.*dataplane adopted.*`).FindString(l))
	}
}

// askDNS starts asking the node's CoreDNS, as a Pod's resolver does, for
// web's AAAA record and for the first name its search list makes of it
// (which must be NXDOMAIN); an answer slower than a second fails.
func (r *run) askDNS(pace time.Duration) *calls {
	ctx, cancel := context.WithCancel(context.Background())
	c := &calls{cancel: cancel, done: make(chan struct{})}
	server := net.JoinHostPort(nodeAddr.String(), "53")
	vip := service.Identity(cluster, "default", "web").VIP
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			began := time.Now()
			addrs, rcode, err := e2enode.Lookup(server, "web.default.svc.cluster.local")
			if err == nil && (rcode != dns.RcodeSuccess || !slices.Equal(addrs, []netip.Addr{vip})) {
				err = fmt.Errorf("web.default.svc.cluster.local: rcode %d, %v", rcode, addrs)
			}
			if err == nil {
				if _, rcode, err = e2enode.Lookup(server, "web.default.svc.cluster.local.default.svc.cluster.local"); err == nil && rcode != dns.RcodeNameError {
					err = fmt.Errorf("web.default.svc.cluster.local.default.svc.cluster.local: rcode %d, want NXDOMAIN", rcode)
				}
			}
			if took := time.Since(began); err == nil && took > time.Second {
				err = fmt.Errorf("answered after %s", took.Round(time.Millisecond))
			}
			c.mu.Lock()
			c.samples = append(c.samples, sample{at: time.Now(), err: err, took: time.Since(began)})
			c.mu.Unlock()
			time.Sleep(pace)
		}
	}()
	return c
}

// dataplaneDrops lists the agent's non-zero dataplane drop counters.
func dataplaneDrops() string {
	resp, err := client.Get("http://127.0.0.1:8082/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "podmin_agent_dataplane_drops_total{") && !strings.HasSuffix(l, " 0") {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

// forgetDaemon takes a daemon that exited on purpose out of the node's
// list, keeping its log beside the next one's.
func (n *node) forgetDaemon(d *e2enode.Daemon) {
	for i, x := range n.procs {
		if x == d {
			n.procs = append(n.procs[:i], n.procs[i+1:]...)
			break
		}
	}
	d.KeepLog()
}

// readyz reads the agent's /readyz inside the node.
func readyz() (int, string) {
	resp, err := client.Get("http://127.0.0.1:8082/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// kubeletDown SIGKILLs kubelet: the agent must say so in /readyz and in
// podmin status, and take it back once kubelet runs again; the running
// Pods are not kubelet's to lose.
func (r *run) kubeletDown(p *e2enode.Proof) {
	_, before, ok := readyPod("web")
	if !ok {
		p.Fatal("no ready web Pod to begin with")
	}
	c := r.callService(50 * time.Millisecond)
	k := r.daemon("kubelet")
	start := time.Now()
	must(p.T, k.Cmd.Process.Signal(syscall.SIGKILL))
	<-k.Done()
	r.forgetDaemon(k)
	var body string
	seen := r.waitFor(p, time.Minute, "/readyz to name kubelet", func() bool {
		var code int
		code, body = readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "kubelet: kubelet is down")
	})
	p.Figure("kubelet SIGKILLed: /readyz 503 after %s: %q", seen.Round(10*time.Millisecond), firstLine(body, "kubelet:"))
	var summary string
	r.waitFor(p, time.Minute, "podmin status to name kubelet", func() bool {
		out, err := r.podminErr(nil, "status", "web", "-g", nodegroup, "-o", "json")
		summary = out
		return err == nil && strings.Contains(out, "kubelet is down")
	})
	state, err := r.status(nodegroup, "web")
	if err != nil || state != "unknown" {
		p.Errorf("podmin status says web is %q (%v) while kubelet is down, want unknown:\n%s", state, err, summary)
	}
	p.Figure("podmin status then: web %s, naming kubelet as down", state)
	r.startKubelet()
	r.waitFor(p, 2*time.Minute, "/readyz 200 with kubelet back", func() bool { code, _ := readyz(); return code == http.StatusOK })
	back := time.Since(start)
	samples := c.stop()
	failed, gap, _ := tally(samples)
	_, after, ok := readyPod("web")
	if !ok || after != before {
		p.Errorf("the web Pod changed across kubelet's restart: %s before, %s (ready %v) after", before, after, ok)
	}
	p.Figure("kubelet restarted: /readyz 200 again %s after the kill; the web Pod %s ran on; %d/%d calls to the Service answered meanwhile, longest gap %s",
		back.Round(10*time.Millisecond), after, len(samples)-failed, len(samples), gap.Round(10*time.Millisecond))
}

// firstLine is the first line of s that contains sub.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// diskFull fills containerd's filesystem (one of its own here) while the
// probe Pod calls the Service, then rolls web to hello:v3, an image the
// node has not pulled: /readyz must name the disk, the rollout must hold
// with the running revision serving and podmin deploy --wait must fail
// saying the disk is full; once space is freed the node must apply
// hello:v3 by itself.
func (r *run) diskFull(p *e2enode.Proof) {
	if !r.probe.IsValid() {
		p.NotRun("the probe Pod never reached the Service (proof 4)")
	}
	const dir = "/var/lib/containerd"
	fill := filepath.Join(dir, "e2e-fill")
	if err := fillUp(fill); err != nil {
		p.Fatalf("fill %s: %v", dir, err)
	}
	defer os.Remove(fill)
	var st unix.Statfs_t
	must(p.T, unix.Statfs(dir, &st))
	var body string
	seen := r.waitFor(p, time.Minute, "/readyz to name the full disk", func() bool {
		var code int
		code, body = readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "disk: the node's disk is full")
	})
	p.Figure("%s filled (%d bytes free): /readyz 503 after %s: %q", dir, st.Bfree*uint64(st.Bsize), seen.Round(10*time.Millisecond), firstLine(body, "disk:"))
	c := r.callService(50 * time.Millisecond)
	start := time.Now()
	_, err := r.podminErr(nil, "deploy", "web", "-g", nodegroup, "--image", "hello:v3", "--service", "--secret", "token",
		"--wait", "--timeout", "1m")
	took := time.Since(start)
	line := firstLine(fmt.Sprint(err), "disk is full")
	if code := exitCode(err); code != 1 || line == "" {
		c.stop()
		p.Fatalf("podmin deploy --wait of hello:v3 on a full disk: exit status %d after %s, want 1 naming the full disk: %v", code, took.Round(10*time.Millisecond), err)
	}
	p.Figure("podmin deploy --wait of hello:v3 exited 1 after %s: %q", took.Round(10*time.Millisecond), line)
	must(p.T, os.Remove(fill))
	freed := time.Now()
	if _, err := r.podminErr(nil, "status", "web", "-g", nodegroup, "--wait", "--timeout", "2m"); err != nil {
		c.stop()
		p.Fatalf("podmin status --wait after the space was freed: %v", err)
	}
	applied := time.Since(freed)
	samples := c.stop()
	failed, gap, _ := tally(samples)
	var v1 int
	for _, s := range samples {
		if s.err == nil && s.version == "v1" && s.at.Before(freed) {
			v1++
		}
	}
	p.Figure("space freed: the node applied hello:v3 by itself, ready %s later; meanwhile %d/%d calls answered (%d from v1 while the disk was full), longest gap %s",
		applied.Round(10*time.Millisecond), len(samples)-failed, len(samples), v1, gap.Round(10*time.Millisecond))
	for _, s := range samples {
		if s.err != nil && s.at.Before(freed) {
			p.Errorf("a call failed while the disk was full and the rollout held: %v", s.err)
			break
		}
	}
	if _, err := r.podminErr(nil, "deploy", "web", "-g", nodegroup, "--image", "hello:v1", "--service", "--secret", "token", "--wait", "--timeout", "2m"); err != nil {
		p.Fatalf("podmin deploy --wait back to hello:v1: %v", err)
	}
	r.waitFor(p, time.Minute, "/readyz without the disk", func() bool {
		_, body := readyz()
		return !strings.Contains(body, "disk:")
	})
}

// fillUp writes one file at path until its filesystem has no space left.
func fillUp(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return err
	}
	if free := int64(st.Bfree) * int64(st.Bsize); free > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, free); err != nil && !errors.Is(err, unix.ENOSPC) {
			return err
		}
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return nil
			}
			return err
		}
	}
}

// rollbackRestarts checks the web Pod after proof 7 rolled it back to the
// revision proof 1 ran: kubelet must count no restart of a Pod that never
// crashed.
func (r *run) rollbackRestarts(p *e2enode.Proof) {
	pod, _, ok := readyPod("web")
	if !ok {
		p.Fatal("no ready web Pod")
	}
	restarts := 0
	for _, c := range pod.Status.ContainerStatuses {
		restarts += int(c.RestartCount)
	}
	out, err := r.podminErr(nil, "status", "web", "-g", nodegroup, "-o", "json")
	if err != nil {
		p.Fatal(err)
	}
	reported := regexp.MustCompile(`"restarts": ([0-9]+)`).FindStringSubmatch(out)
	if restarts != 0 || reported == nil || reported[1] != "0" {
		p.Fatalf("after the rollback to hello:v1 (the revision proof 1 ran) kubelet counts %d restart(s), podmin status %v", restarts, reported)
	}
	p.Figure("web rolled back to the revision it ran first (incarnation %s): kubelet counts 0 restarts, podmin status reports 0",
		pod.Annotations["podmin.dev/incarnation"])
}

// lostIndex deletes deployments/index.json while the node runs web and
// probe and the probe Pod calls the Service: the node must keep both and
// say to run podmin index rebuild, podmin deploy must refuse rather than
// commit a fresh index, podmin list must say the index is missing, and
// podmin index rebuild must restore exactly the committed entries, with
// no Pod stopped and no call failed.
func (r *run) lostIndex(p *e2enode.Proof) {
	if !r.probe.IsValid() {
		p.NotRun("the probe Pod never reached the Service (proof 4)")
	}
	ctx := context.Background()
	b := local.Open(r.bucket)
	before, _, err := state.ReadIndex(ctx, b)
	if err != nil {
		p.Fatal(err)
	}
	uids := func() map[string]string {
		out := map[string]string{}
		for _, name := range []string{"web", "probe"} {
			for _, pod := range podsNamed(staticName(name)) {
				out[name] = string(pod.UID)
			}
		}
		return out
	}
	running := uids()
	c := r.callService(50 * time.Millisecond)
	must(p.T, b.Delete(ctx, state.IndexPath, ""))
	var body string
	seen := r.waitFor(p, time.Minute, "/readyz to name the lost index", func() bool {
		var code int
		code, body = readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "podmin index rebuild")
	})
	p.Figure("index deleted: /readyz 503 after %s, advising podmin index rebuild", seen.Round(10*time.Millisecond))
	_, err = r.podminErr(nil, "deploy", "extra", "-g", nodegroup, "--image", "hello:v1")
	if code := exitCode(err); code != 4 || !strings.Contains(fmt.Sprint(err), "podmin index rebuild") {
		c.stop()
		p.Fatalf("podmin deploy with the index lost: exit status %d, want 4 pointing at podmin index rebuild: %v", code, err)
	}
	if _, err := b.Head(ctx, state.IndexPath); err == nil {
		c.stop()
		p.Fatal("podmin deploy wrote an index although the index was lost")
	}
	p.Figure("podmin deploy refused (exit 4): %q", firstLine(fmt.Sprint(err), "podmin index rebuild"))
	_, err = r.podminErr(nil, "list")
	if code := exitCode(err); code != 1 || !strings.Contains(fmt.Sprint(err), "missing") {
		c.stop()
		p.Fatalf("podmin list with the index lost: exit status %d, want 1 saying it is missing: %v", code, err)
	}
	start := time.Now()
	if _, err := r.podminErr(nil, "index", "rebuild", "-y"); err != nil {
		c.stop()
		p.Fatalf("podmin index rebuild -y: %v", err)
	}
	after, _, err := state.ReadIndex(ctx, b)
	if err != nil {
		c.stop()
		p.Fatal(err)
	}
	if !slices.Equal(after.Items(), before.Items()) {
		c.stop()
		p.Fatalf("rebuilt index %v, want the committed %v", after.Items(), before.Items())
	}
	r.waitFor(p, time.Minute, "/readyz 200 after the rebuild", func() bool { code, _ := readyz(); return code == http.StatusOK })
	healed := time.Since(start)
	samples := c.stop()
	failed, gap, firstErr := tally(samples)
	if failed > 0 {
		p.Errorf("%d of %d calls to the Service failed while the index was lost (first: %v)", failed, len(samples), firstErr)
	}
	if now := uids(); !maps.Equal(now, running) {
		p.Errorf("Pods changed while the index was lost: %v, then %v", running, now)
	}
	p.Figure("podmin index rebuild -y restored the %d committed entries; node ready %s later; %d/%d calls answered throughout, longest gap %s; web and probe never stopped",
		len(after.Items()), healed.Round(10*time.Millisecond), len(samples)-failed, len(samples), gap.Round(10*time.Millisecond))
}

// waitAfterFix deploys a Pod whose secret does not exist yet: deploy
// --wait must fail with the node's error, said once in podmin status;
// once the secret is created, podmin status --wait must wait for the node
// to apply it instead of failing on the error reported before the fix.
func (r *run) waitAfterFix(p *e2enode.Proof) {
	_, err := r.podminErr(nil, "deploy", "fixme", "-g", nodegroup, "--image", "hello:v1", "--secret", "later", "--wait", "--timeout", "1m")
	r.extra = append(r.extra, [2]string{nodegroup, "fixme"})
	defer r.forget(p, nodegroup, "fixme")
	if code := exitCode(err); code != 1 || !strings.Contains(fmt.Sprint(err), "secret") {
		p.Fatalf("podmin deploy --wait of a Pod whose secret is missing: exit status %d, want 1 with the node's secret error: %v", code, err)
	}
	table, _ := r.podminErr(nil, "status", "fixme", "-g", nodegroup)
	const msg = "value /e2e/default/fixme/later does not exist"
	for _, l := range strings.Split(table, "\n") {
		if n := strings.Count(l, msg); n > 1 {
			p.Errorf("podmin status says the node's error %d times in one line: %s", n, l)
		}
	}
	if !strings.Contains(table, msg) {
		p.Fatalf("podmin status does not show the node's error:\n%s", table)
	}
	if _, err := r.podminErr([]byte("now-it-exists"), "secret", "create", "later", "--for", "fixme", "--stdin"); err != nil {
		p.Fatal(err)
	}
	start := time.Now()
	if _, err := r.podminErr(nil, "status", "fixme", "-g", nodegroup, "--wait", "--timeout", "2m"); err != nil {
		p.Fatalf("podmin status --wait right after the secret was created: %v", err)
	}
	p.Figure("the error is said once per line of podmin status; podmin status --wait right after creating the secret returned ready after %s",
		time.Since(start).Round(10*time.Millisecond))
}

// traceback runs a failing recipe by its absolute path from / and checks
// that the traceback names the file by that path.
func (r *run) traceback(p *e2enode.Proof) {
	dir := filepath.Join(r.dir, "recipes")
	must(p.T, os.MkdirAll(dir, 0o755))
	recipe := filepath.Join(dir, "fails.star")
	must(p.T, os.WriteFile(recipe, []byte("def main(ctx):\n    inner()\n\ndef inner():\n    fail(\"on purpose\")\n"), 0o644))
	cmd := exec.Command(filepath.Join(r.bin, "podmin"), "run", recipe)
	cmd.Env, cmd.Dir = r.env, "/"
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), recipe+":5") {
		p.Fatalf("podmin run %s from /: %v, want a traceback naming %s:5:\n%s", recipe, err, recipe, out)
	}
	p.Figure("the traceback names %s", firstLine(string(out), recipe+":5"))
}
