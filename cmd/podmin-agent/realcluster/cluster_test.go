// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// Names of the cluster the test creates.
const (
	clusterID = "e2e"
	bucket    = "podmin-e2e-cluster"
	region    = "us-east-1"
	workers   = "workers"
	// The S3 server's and SSM's ports on the router's address.
	s3Port  = "7070"
	ssmPort = "5050"
	// Credentials of the S3 server's root user; moto takes any.
	accessKey = "podmin-e2e-access"
	secretKey = "podmin-e2e-secret-0123456789"
)

// node is one node of the cluster, seen from the router.
type node struct {
	i     int    // 1, 2, ...
	id    string // node ID, kubelet's node name: node1
	group string
	cfg   e2enode.Config
	h     *holder
	port  string // its end on the bridge
	logs  string

	mu       sync.Mutex
	daemons  map[string]*e2enode.Daemon
	lost     bool // proof 6 took it off the network
	rmCgroup func() error
}

// daemon is the node's running daemon of that name, or nil.
func (n *node) daemon(name string) *e2enode.Daemon {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.daemons[name]
}

// cluster is the state the proofs share.
type cluster struct {
	t       *testing.T
	rep     *e2enode.Report
	dir     string
	bin     string
	tools   string
	logs    string
	nodesMu sync.Mutex
	nodes   []*node // allNodes reads it
	client  *holder
	servers []*e2enode.Daemon // versitygw, moto
	store   objstore.Bucket   // the bucket, as the test reads it
	env     []string          // the CLI's environment
	started time.Time

	pods   *podSampler
	planes *planeSampler
	tls    *tlsTrust
}

// runCluster is the test inside the router's namespaces.
func runCluster(t *testing.T) {
	dir := os.Getenv(envDir)
	c := &cluster{t: t, rep: e2enode.OpenReport(t, reportName, os.Getenv(envReport)), dir: dir, bin: filepath.Join(dir, "bin"),
		tools: os.Getenv(envTools), logs: filepath.Join(dir, "logs"), started: time.Now()}
	count, err := nodeCount()
	must(t, err)
	must(t, os.MkdirAll(c.logs, 0o755))
	must(t, e2enode.RecordNamespaces(dir, 0))
	must(t, e2enode.MakePrivate())
	t.Cleanup(c.teardown)
	must(t, routerNetwork())
	c.startServers()
	c.client, err = spawnHolder("client", "-", syscall.CLONE_NEWNET, c.logs)
	must(t, err)
	must(t, e2enode.RecordNamespaces(dir, c.client.pid()))
	must(t, plug(c.client, "cl", clientAddr(0)))
	var wg sync.WaitGroup
	nodes := make([]*node, count)
	errs := make([]error, count)
	for i := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = c.newNode(i+1, workers)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	c.nodes = nodes
	c.connect()
	c.pushImages()
	for _, n := range c.allNodes() {
		must(t, c.startNode(n))
	}
	c.rep.Line(fmt.Sprintf("cluster up in %s: %d nodes (containerd, kubelet, podmin-agent, CoreDNS each), versitygw S3, moto SSM",
		time.Since(c.started).Round(10*time.Millisecond), count))
	c.runProofs()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// s3Endpoint and ssmEndpoint are the servers' URLs on the router.
func s3Endpoint() string  { return "http://" + net.JoinHostPort(routerAddr.String(), s3Port) }
func ssmEndpoint() string { return "http://" + net.JoinHostPort(routerAddr.String(), ssmPort) }

// startServers starts the S3 server and moto on the router's address and
// points the AWS SDK of the test, the CLI and the agents at them, as an
// operator's environment would (no shared files, no instance metadata).
func (c *cluster) startServers() {
	t := c.t
	s3dir := filepath.Join(c.dir, "s3")
	must(t, os.MkdirAll(s3dir, 0o755))
	gw, err := e2enode.Start(c.logs, "versitygw", nil, []string{"ROOT_ACCESS_KEY_ID=" + accessKey, "ROOT_SECRET_ACCESS_KEY=" + secretKey},
		os.Getenv(envVersityGW), "--port", net.JoinHostPort(routerAddr.String(), s3Port), "--quiet", "posix", s3dir)
	must(t, err)
	c.servers = append(c.servers, gw)
	moto, err := e2enode.Start(c.logs, "moto", nil, nil, "moto_server", "-H", routerAddr.String(), "-p", ssmPort)
	must(t, err)
	c.servers = append(c.servers, moto)
	for _, d := range c.servers {
		addr := net.JoinHostPort(routerAddr.String(), map[string]string{"versitygw": s3Port, "moto": ssmPort}[d.Name])
		c.waitFor(t, time.Minute, d.Name+" listening on "+addr, func() bool {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
			}
			return err == nil
		})
	}
	home := filepath.Join(c.dir, "home")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_S3":              s3Endpoint(),
		"AWS_ENDPOINT_URL_SSM":             ssmEndpoint(),
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": ssmEndpoint(),
		"AWS_ACCESS_KEY_ID":                accessKey,
		"AWS_SECRET_ACCESS_KEY":            secretKey,
		"AWS_REGION":                       region,
		"AWS_EC2_METADATA_DISABLED":        "true",
		"AWS_CONFIG_FILE":                  filepath.Join(home, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE":      filepath.Join(home, "aws-credentials"),
		"XDG_CONFIG_HOME":                  home + "/config",
		"XDG_CACHE_HOME":                   home + "/cache",
		"XDG_DATA_HOME":                    home + "/data",
		"XDG_RUNTIME_DIR":                  home + "/run",
	} {
		// This process runs only the cluster: its children (the CLI,
		// the agents) inherit the environment.
		must(t, os.Setenv(k, v))
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"} {
		must(t, os.Unsetenv(k))
	}
	c.env = os.Environ()
	c.store, err = s3store.New(context.Background(), s3store.Options{Bucket: bucket, Region: region})
	must(t, err)
}

// newNode makes node i of group: its root and mounts, cgroup root,
// configuration, namespaces and link, and starts its containerd.
func (c *cluster) newNode(i int, group string) (*node, error) {
	n := &node{i: i, id: fmt.Sprintf("node%d", i), group: group, port: fmt.Sprintf("n%d", i), daemons: map[string]*e2enode.Daemon{}}
	ndir := filepath.Join(c.dir, n.id)
	n.logs = filepath.Join(c.logs, n.id)
	n.cfg = e2enode.Config{Name: n.id, Root: filepath.Join(ndir, "root"), Tools: c.tools, Bin: c.bin, Addr: nodeAddr(i),
		Resolver: routerAddr, PodPrefix: podPrefix(i), Cgroup: "/" + e2enode.CgroupName(c.dir) + "-" + n.id}
	if err := os.MkdirAll(n.logs, 0o755); err != nil {
		return nil, err
	}
	// The root's filesystems are mounted in the router's namespace
	// before the node's is cloned from it: both see the same ones (the
	// test reads kubelet's socket and the pinned dataplane there).
	if err := e2enode.PrepareRoot(n.cfg.Root, "1g"); err != nil {
		return nil, err
	}
	var err error
	if n.rmCgroup, err = e2enode.MakeCgroupRoot(strings.TrimPrefix(n.cfg.Cgroup, "/")); err != nil {
		return n, err
	}
	if err := e2enode.WriteConfigs(n.cfg); err != nil {
		return n, err
	}
	if n.h, err = spawnHolder(n.id, n.cfg.Root, syscall.CLONE_NEWNS|syscall.CLONE_NEWNET, c.logs); err != nil {
		return n, err
	}
	if err := e2enode.RecordNamespaces(c.dir, n.h.pid()); err != nil {
		return n, err
	}
	if err := plug(n.h, n.port, nodeAddr(i)); err != nil {
		return n, err
	}
	table := fmt.Sprint(100 + i)
	if err := ips(nil, []string{"-6", "route", "add", podPrefix(i).String(), "via", nodeAddr(i).String(), "dev", "br0"}); err != nil {
		return n, err
	}
	// The client reaches the VIPs through node i from its address i.
	if err := ips(c.client.enter(false),
		[]string{"-6", "addr", "add", fmt.Sprintf("%s/%d", clientAddr(i), lanBits), "dev", "eth0", "nodad"},
		[]string{"-6", "rule", "add", "from", clientAddr(i).String(), "lookup", table},
		[]string{"-6", "route", "add", vipRange.String(), "via", nodeAddr(i).String(), "dev", "eth0", "table", table},
	); err != nil {
		return n, err
	}
	if _, err := c.start(n, "containerd", e2enode.ContainerdEnv(n.cfg, n.logs), e2enode.ContainerdArgs(n.cfg)...); err != nil {
		return n, err
	}
	return n, c.waitErr(time.Minute, n.id+"'s containerd socket", func() bool {
		return e2enode.IsSocket(n.cfg.HostPath(e2enode.ContainerdSock))
	})
}

// allNodes lists the nodes, proof 4b's included once it joined.
func (c *cluster) allNodes() []*node {
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	return append([]*node(nil), c.nodes...)
}

// addNode adds a node made while the proofs run.
func (c *cluster) addNode(n *node) {
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	c.nodes = append(c.nodes, n)
}

// start runs a daemon in node n's namespaces.
func (c *cluster) start(n *node, name string, env []string, argv ...string) (*e2enode.Daemon, error) {
	d, err := e2enode.Start(n.logs, name, n.h.enter(true), env, argv...)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.daemons[name] = d
	n.mu.Unlock()
	return d, nil
}

// startNode starts kubelet, the agent and CoreDNS on node n, once the
// cluster is set up.
func (c *cluster) startNode(n *node) error {
	if _, err := c.start(n, "kubelet", nil, e2enode.KubeletArgs(n.cfg)...); err != nil {
		return err
	}
	if err := c.waitErr(2*time.Minute, n.id+"'s kubelet Pods API socket", func() bool {
		return e2enode.IsSocket(n.cfg.HostPath(e2enode.PodsAPISock))
	}); err != nil {
		return err
	}
	if err := c.startAgent(n); err != nil {
		return err
	}
	if _, err := c.start(n, "coredns", nil, e2enode.CoreDNSArgs(n.cfg)...); err != nil {
		return err
	}
	return c.waitErr(time.Minute, n.id+"'s CoreDNS answering the cluster domain", func() bool {
		_, rcode, err := e2enode.Lookup(net.JoinHostPort(n.cfg.Addr.String(), "53"), "nothing.default.svc.cluster.local")
		return err == nil && rcode == dns.RcodeNameError
	})
}

// startAgent starts podmin-agent on node n with the aws provider, as a
// node's unit does, and waits until it serves.
func (c *cluster) startAgent(n *node) error {
	env := []string{"PODMIN_ROOT=" + n.cfg.Root, "PODMIN_AGENT_DATAPLANE=on", "PODMIN_AGENT_NODE_ADDR=" + n.cfg.Addr.String(),
		"PODMIN_AGENT_NODE_ID=" + n.id, "PODMIN_AGENT_FLUENT_BIT_RESTART=off"}
	if old := n.daemon("podmin-agent"); old != nil {
		old.KeepLog()
	}
	d, err := c.start(n, "podmin-agent", env, filepath.Join(c.bin, "podmin-agent"), "--provider", "aws", "--bucket", bucket,
		"--region", region, "--cluster", clusterID, "--nodegroup", n.group, "--ipv6-prefix", n.cfg.PodPrefix.String())
	if err != nil {
		return err
	}
	return c.waitErr(time.Minute, n.id+"'s agent serving health endpoints and Service DNS", func() bool {
		l := d.LogText()
		return strings.Contains(l, "serving health endpoints") && strings.Contains(l, "serving service DNS")
	})
}

// podmin runs the podmin CLI as a user does and returns its standard
// output; the error carries both outputs.
func (c *cluster) podmin(stdin []byte, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bin, "podmin"), args...)
	cmd.Env = c.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podmin %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// mustPodmin is podmin for a step the proofs cannot do without.
func (c *cluster) mustPodmin(args ...string) string {
	c.t.Helper()
	out, err := c.podmin(nil, args...)
	must(c.t, err)
	return out
}

// allDaemons lists every daemon of the cluster.
func (c *cluster) allDaemons() []*e2enode.Daemon {
	out := append([]*e2enode.Daemon(nil), c.servers...)
	for _, n := range c.allNodes() {
		n.mu.Lock()
		for _, d := range n.daemons {
			out = append(out, d)
		}
		n.mu.Unlock()
	}
	return out
}

// waitErr polls cond every 20 ms until it holds or limit passes.
func (c *cluster) waitErr(limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %s (logs in %s)", limit, what, c.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// waitFor is waitErr failing t, with the tails of the daemons' logs.
func (c *cluster) waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if err := c.waitErr(limit, what, cond); err != nil {
		var tails []string
		for _, d := range c.allDaemons() {
			tails = append(tails, d.Tail())
		}
		t.Fatalf("%v\n%s", err, strings.Join(tails, "\n"))
	}
	return time.Since(start)
}
