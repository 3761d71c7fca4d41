// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/cloud"
	cloudlocal "podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/syncio"
)

// clusterAgent is one real podmin-agent process of a local cluster.
type clusterAgent struct {
	t      *testing.T
	name   string
	root   string
	cmd    *exec.Cmd
	logs   syncio.Buffer
	dns    chan string
	exited chan error
}

// podsKubelet stands in for one node's kubelet: its Pods API serves the
// static Pods of the node's manifests directory, ready at ip.
type podsKubelet struct {
	podsapi.UnimplementedPodsServer
	manifests string
	ip        string
}

// pods returns the node's Pods by name, each marshalled as kubelet sends it.
func (k *podsKubelet) pods() map[string][]byte {
	out := map[string][]byte{}
	files, _ := filepath.Glob(filepath.Join(k.manifests, "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var p corev1.Pod
		if yaml.Unmarshal(b, &p) != nil {
			continue
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: k.ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if m, err := p.Marshal(); err == nil {
			out[p.Name] = m
		}
	}
	return out
}

func (k *podsKubelet) ListPods(context.Context, *podsapi.ListPodsRequest) (*podsapi.ListPodsResponse, error) {
	var out [][]byte
	for _, b := range k.pods() {
		out = append(out, b)
	}
	return &podsapi.ListPodsResponse{Pods: out}, nil
}

func (k *podsKubelet) WatchPods(_ *podsapi.WatchPodsRequest, s grpc.ServerStreamingServer[podsapi.WatchPodsEvent]) error {
	return streamPods(s, k.pods, nil, 50*time.Millisecond)
}

// startKubelet serves a kubelet Pods API beneath root before the agent
// starts, so the local agent watches it.
func startKubelet(t *testing.T, root, ip string) {
	t.Helper()
	sock := filepath.Join(root, filepath.FromSlash(pods.SocketPath))
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix socket at %s: %v", sock, err)
	}
	srv := grpc.NewServer()
	podsapi.RegisterPodsServer(srv, &podsKubelet{manifests: filepath.Join(root, "etc", "podmin", "manifests"), ip: ip})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
}

var dnsAddrRE = regexp.MustCompile(`msg="serving service DNS".* addr=(\S+)`)

func (a *clusterAgent) log() string { return a.logs.String() }

// startClusterAgent runs the built podmin-agent binary in local node mode
// with its own root, coordination port and DNS port.
func startClusterAgent(t *testing.T, bin string, env []string, dir, bucket string, i int) *clusterAgent {
	t.Helper()
	a := &clusterAgent{t: t, name: fmt.Sprintf("agent-%d", i), root: filepath.Join(dir, fmt.Sprintf("root-%d", i)),
		dns: make(chan string, 1), exited: make(chan error, 1)}
	startKubelet(t, a.root, podIP(i))
	a.cmd = exec.Command(bin, "--provider", "local", "--bucket", bucket, "--region", "local",
		"--cluster", "demo", "--nodegroup", "workers", "--ipv6-prefix", fmt.Sprintf("2001:db8:0:1:%x::/80", i+1))
	a.cmd.Env = append(append([]string{}, env...), "PODMIN_ROOT="+a.root,
		"PODMIN_AGENT_HEALTH_ADDR=127.0.0.1:0", "PODMIN_AGENT_REGISTRY_ADDR=off",
		"PODMIN_AGENT_API_ADDR=[::1]:0", "PODMIN_AGENT_DNS_ADDR=127.0.0.1:0",
		"PODMIN_AGENT_POLL_INTERVAL=100ms", "PODMIN_AGENT_DNS_TTL_MARGIN=50ms", "PODMIN_AGENT_DRAIN="+clusterDrain.String())
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go followAgent(a.cmd, stderr, &a.logs, dnsAddrRE, a.dns, a.exited)
	t.Cleanup(func() { _ = a.cmd.Process.Kill() })
	return a
}

func (a *clusterAgent) dnsAddr() string {
	a.t.Helper()
	select {
	case addr := <-a.dns:
		return addr
	case err := <-a.exited:
		a.t.Fatalf("%s exited: %v\n%s", a.name, err, a.log())
	case <-time.After(60 * time.Second):
		a.t.Fatalf("%s serves no Service DNS:\n%s", a.name, a.log())
	}
	return ""
}

// podIP is the ready address of agent i's Pods, inside its Pod /80.
func podIP(i int) string { return fmt.Sprintf("2001:db8:0:1:%x::10", i+1) }

// queryAAAA asks one agent's DNS server over UDP.
func queryAAAA(addr, name string) ([]netip.Addr, int, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeAAAA)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return nil, 0, err
	}
	var out []netip.Addr
	for _, rr := range r.Answer {
		if aaaa, ok := rr.(*dns.AAAA); ok {
			a, _ := netip.AddrFromSlice(aaaa.AAAA)
			out = append(out, a)
		}
	}
	return out, r.Rcode, nil
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s\n%s", limit, what, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLocalClusterEndToEnd is local node mode as a cluster: three real
// podmin-agent processes on one machine and one local bucket, after setup
// stored the CA secrets, elect exactly one leader, exchange their ready
// endpoints (from a kubelet Pods API beneath each root) over mTLS into the
// leader's snapshot, resolve the Service's VIP through each agent's DNS, and
// give the Service's Pod its workload identity; a Service deployed later
// reaches every agent through the leader, a SIGTERMed follower drains its
// endpoint out of the leader's snapshot, and a SIGTERMed leader resigns to
// a follower.
func TestLocalClusterEndToEnd(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("local node mode runs on Linux and macOS")
	}
	n := newNode(t)
	bin := filepath.Join(n.dir, "podmin-agent")
	if out, err := exec.Command("go", "build", "-o", bin, "podmin.dev/podmin/cmd/podmin-agent").CombinedOutput(); err != nil {
		t.Fatalf("build podmin-agent: %v\n%s", err, out)
	}
	n.podminOK("connect", "demo", "--provider", "local", "--bucket", n.bucket)
	envMap := map[string]string{}
	for _, kv := range n.env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	home, _ := os.UserHomeDir()
	dirs, err := paths.Resolve(paths.Env{GOOS: runtime.GOOS, Home: home, Getenv: func(k string) string { return envMap[k] }})
	if err != nil {
		t.Fatal(err)
	}
	env := &builtins.Env{Dirs: dirs, Providers: map[string]cloud.Provider{"local": cloudlocal.New(dirs.Data)},
		Secrets: func(_ context.Context, _ contexts.Context, provider string) (secrets.Store, error) {
			if provider != secrets.Local {
				return nil, fmt.Errorf("no %s secrets provider in this test", provider)
			}
			return secretslocal.New(filepath.Join(dirs.Data, "secrets")), nil
		}}
	ca, err := env.EnsureCASecrets(context.Background(), builtins.CASecretsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ca.Provider != "local" || len(ca.Secrets) != 2 {
		t.Fatalf("CA secrets %+v", ca)
	}
	n.podminOK("deploy", "web", "-g", "workers", "--image", "hello:v1", "--service")

	var agents []*clusterAgent
	for i := range 3 {
		agents = append(agents, startClusterAgent(t, bin, n.env, n.dir, n.bucket, i))
	}
	allLogs := func() string {
		var b strings.Builder
		for _, a := range agents {
			fmt.Fprintf(&b, "--- %s\n%s", a.name, a.log())
		}
		return b.String()
	}
	var dnsAddrs []string
	for _, a := range agents {
		dnsAddrs = append(dnsAddrs, a.dnsAddr())
	}

	// Exactly one leader: the lease names one of the three agents, and
	// exactly one agent says it acquired it.
	var lease struct {
		LeaderID   string `json:"leaderID"`
		LeaderAddr string `json:"leaderAddr"`
	}
	// The lease lands in the bucket before its holder logs that it
	// acquired it: wait for both.
	waitFor(t, 30*time.Second, "a lease in dns/leader.json and its holder's log line", func() bool {
		b, err := os.ReadFile(filepath.Join(n.bucket, "dns", "leader.json"))
		if err != nil || json.Unmarshal(b, &lease) != nil || lease.LeaderID == "" {
			return false
		}
		for _, a := range agents {
			if strings.Contains(a.log(), `msg="acquired the lease"`) {
				return true
			}
		}
		return false
	}, allLogs)
	holders, acquired := 0, 0
	for _, a := range agents {
		if regexp.MustCompile(`msg="coordination enabled" .*node=` + regexp.QuoteMeta(lease.LeaderID) + ` `).MatchString(a.log()) {
			holders++
		}
		if strings.Contains(a.log(), `msg="acquired the lease"`) {
			acquired++
		}
	}
	if holders != 1 || acquired != 1 {
		t.Fatalf("lease holder %s is %d of the agents; %d agents acquired the lease\n%s", lease.LeaderID, holders, acquired, allLogs())
	}

	// Every agent's DNS resolves the Service to its formula VIP.
	want := service.Identity("demo", "default", "web").VIP
	for i, addr := range dnsAddrs {
		waitFor(t, 45*time.Second, fmt.Sprintf("web.default.svc.cluster.local on %s (%s)", agents[i].name, addr), func() bool {
			got, rcode, err := queryAAAA(addr, "web.default.svc.cluster.local")
			return err == nil && rcode == dns.RcodeSuccess && len(got) == 1 && got[0] == want
		}, allLogs)
		if _, rcode, err := queryAAAA(addr, "nothing.default.svc.cluster.local"); err != nil || rcode != dns.RcodeNameError {
			t.Fatalf("unknown Service on %s: rcode %d, %v", agents[i].name, rcode, err)
		}
	}

	// The Service's Pod gets its workload identity on every node.
	for _, a := range agents {
		file := filepath.Join(a.root, "etc", "podmin", "manifests", "web.yaml")
		cert := filepath.Join(a.root, "run", "podmin", "workloads", "web", workload.LinkName, workload.CertFile)
		waitFor(t, 60*time.Second, a.name+": web.yaml with an identity revision and its certificate", func() bool {
			b, err := os.ReadFile(file)
			if err != nil || !strings.Contains(string(b), workload.RevisionAnnotation) {
				return false
			}
			c, err := os.ReadFile(cert)
			return err == nil && strings.Contains(string(c), "BEGIN CERTIFICATE")
		}, allLogs)
	}

	// Each node reports its ready web Pod over mTLS; the leader's durable
	// snapshot holds all three endpoints, one per node.
	waitFor(t, 30*time.Second, "three web endpoints in dns/services.pb", func() bool {
		b, err := os.ReadFile(filepath.Join(n.bucket, filepath.FromSlash(coordinator.SnapshotKey)))
		if err != nil {
			return false
		}
		snap, err := coordinator.Unmarshal(b)
		if err != nil {
			return false
		}
		for _, s := range snap.Services {
			if s.Namespace != "default" || s.Name != "web" {
				continue
			}
			addrs, nodes := map[string]bool{}, map[string]bool{}
			for _, e := range s.Endpoints {
				addrs[e.Address], nodes[e.NodeId] = true, true
			}
			return len(s.Endpoints) == 3 && len(nodes) == 3 && addrs[podIP(0)] && addrs[podIP(1)] && addrs[podIP(2)]
		}
		return false
	}, allLogs)

	rolloutWithdrawsBeforeReplacing(t, n, agents, allLogs)

	// A Service deployed while the agents run reaches the followers only
	// through the leader's snapshots over mTLS.
	n.podminOK("deploy", "api", "-g", "workers", "--image", "api:v1", "--service")
	wantAPI := service.Identity("demo", "default", "api").VIP
	for i, addr := range dnsAddrs {
		waitFor(t, 30*time.Second, fmt.Sprintf("api.default.svc.cluster.local on %s", agents[i].name), func() bool {
			got, rcode, err := queryAAAA(addr, "api.default.svc.cluster.local")
			return err == nil && rcode == dns.RcodeSuccess && len(got) == 1 && got[0] == wantAPI
		}, allLogs)
	}

	// SIGTERM a follower: it drains, so its endpoint leaves the leader's
	// snapshot within the 5 s shutdown rather than after the lease window.
	var leader *clusterAgent
	var rest []*clusterAgent
	for _, a := range agents {
		if strings.Contains(a.log(), `msg="acquired the lease"`) {
			leader = a
		} else {
			rest = append(rest, a)
		}
	}
	leaving := rest[0]
	rest = rest[1:]
	leavingIP := podIP(slices.Index(agents, leaving))
	signalled := time.Now()
	_ = leaving.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, 5*time.Second, leaving.name+"'s endpoint leaves dns/services.pb", func() bool {
		b, err := os.ReadFile(filepath.Join(n.bucket, filepath.FromSlash(coordinator.SnapshotKey)))
		if err != nil {
			return false
		}
		snap, err := coordinator.Unmarshal(b)
		if err != nil {
			return false
		}
		for _, s := range snap.Services {
			for _, e := range s.Endpoints {
				if e.Address == leavingIP {
					return false
				}
			}
		}
		return len(snap.Services) == 2
	}, allLogs)
	t.Logf("SIGTERM of follower %s: its endpoint left the leader's snapshot %s after the signal", leaving.name, time.Since(signalled))
	select {
	case err := <-leaving.exited:
		if err != nil {
			t.Fatalf("%s exited with %v\n%s", leaving.name, err, leaving.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit on SIGTERM\n%s", leaving.name, leaving.log())
	}
	if !strings.Contains(leaving.log(), "drained: the leader wrote a snapshot without this node's endpoints") {
		t.Fatalf("%s did not drain:\n%s", leaving.name, leaving.log())
	}

	// SIGTERM the leader: it resigns and another agent takes the lease.
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-leader.exited:
		if err != nil {
			t.Fatalf("%s exited with %v\n%s", leader.name, err, leader.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit on SIGTERM\n%s", leader.name, leader.log())
	}
	if !strings.Contains(leader.log(), "resigned the lease") {
		t.Fatalf("the leader did not resign:\n%s", leader.log())
	}
	old := lease.LeaderID
	waitFor(t, 30*time.Second, "a follower takes over the lease", func() bool {
		b, err := os.ReadFile(filepath.Join(n.bucket, "dns", "leader.json"))
		return err == nil && json.Unmarshal(b, &lease) == nil && lease.LeaderID != "" && lease.LeaderID != old
	}, allLogs)

	// SIGTERM: the other agents exit cleanly too.
	for _, a := range rest {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, a := range rest {
		select {
		case err := <-a.exited:
			if err != nil {
				t.Fatalf("%s exited with %v\n%s", a.name, err, a.log())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not exit on SIGTERM\n%s", a.name, a.log())
		}
	}
}

// clusterDrain is the drain of the local cluster's agents.
const clusterDrain = time.Second

var (
	nodeIDRE    = regexp.MustCompile(`msg="coordination enabled" .*node=(\S+)`)
	writtenRE   = regexp.MustCompile(`time=(\S+) level=INFO msg="static Pod written" .*deployment=workers/web file=web.yaml revision=(\S+)`)
	withdrawnRE = regexp.MustCompile(`time=(\S+) level=INFO msg="rollout slot: every live node applied the snapshot without the Pod's endpoints" .*peer=(\S+) deployment=workers/web after=(\S+) applied_after="([^"]*)"`)
)

// rolloutWithdrawsBeforeReplacing rolls web out to a new revision over
// the three agents and checks, from their logs, that each node replaced
// its Pod only after the leader heard every node confirm that its
// dataplane and DNS hold the snapshot without that Pod's endpoint, and a
// drain after that; the figures are logged.
func rolloutWithdrawsBeforeReplacing(t *testing.T, n *node, agents []*clusterAgent, allLogs func() string) {
	t.Helper()
	start := time.Now()
	n.podminOK("deploy", "web", "-g", "workers", "--image", "hello:v2", "--service")
	for _, a := range agents {
		file := filepath.Join(a.root, "etc", "podmin", "manifests", "web.yaml")
		waitFor(t, 60*time.Second, a.name+": web.yaml at hello:v2", func() bool {
			b, err := os.ReadFile(file)
			return err == nil && strings.Contains(string(b), "hello:v2")
		}, allLogs)
	}
	took := time.Since(start)
	revRE := regexp.MustCompile(regexp.QuoteMeta(nodepod.RevisionAnnotation) + `: (\S+)`)
	writtenAt := func(a *clusterAgent, rev string) time.Time {
		for _, w := range writtenRE.FindAllStringSubmatch(a.log(), -1) {
			if w[2] == rev {
				at, _ := time.Parse(time.RFC3339Nano, w[1])
				return at
			}
		}
		return time.Time{}
	}
	writes := map[*clusterAgent]time.Time{}
	for _, a := range agents {
		b, _ := os.ReadFile(filepath.Join(a.root, "etc", "podmin", "manifests", "web.yaml"))
		m := revRE.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: web.yaml carries no revision:\n%s", a.name, b)
		}
		// The file is renamed into place before the agent logs it.
		waitFor(t, 10*time.Second, a.name+" logged writing revision "+string(m[1]), func() bool {
			writes[a] = writtenAt(a, string(m[1]))
			return !writes[a].IsZero()
		}, allLogs)
	}
	all := allLogs()
	for _, a := range agents {
		m := nodeIDRE.FindStringSubmatch(a.log())
		if m == nil {
			t.Fatalf("%s logged no node ID:\n%s", a.name, a.log())
		}
		id := m[1]
		written := writes[a]
		var confirmed time.Time
		var after, each string
		for _, w := range withdrawnRE.FindAllStringSubmatch(all, -1) {
			if w[2] == id {
				confirmed, _ = time.Parse(time.RFC3339Nano, w[1])
				after, each = w[3], w[4]
			}
		}
		if confirmed.IsZero() || written.IsZero() {
			t.Fatalf("%s (%s): no confirmation of its withdrawal or no new file in the logs\n%s", a.name, id, all)
		}
		gap := written.Sub(confirmed)
		t.Logf("%s: every node applied the withdrawal of its endpoint %s after its slot was granted (%s); the new file was written %s after that (drain %s)",
			id, after, each, gap, clusterDrain)
		if gap < clusterDrain {
			t.Errorf("%s replaced its Pod %s after every node confirmed the withdrawal, before the %s drain ended\n%s", id, gap, clusterDrain, all)
		}
	}
	t.Logf("rollout of three nodes took %s", took)
}
