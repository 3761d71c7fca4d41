// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// The node's network: eth0 holds the node address and routes through the
// "vpc" namespace, which routes the Pod prefix back to the node as AWS
// routes a delegated prefix to its ENI.
var (
	nodeAddr  = netip.MustParseAddr("2001:db8:0:e2e::10")
	vpcAddr   = netip.MustParseAddr("2001:db8:0:e2e::1")
	podPrefix = netip.MustParsePrefix("2001:db8:0:e2e1:1::/80")
)

// Names of the cluster the test creates, and the node's name: kubelet
// names a static Pod <name>-<node name>, which must be a DNS subdomain.
const (
	cluster   = "e2e"
	nodegroup = "workers"
	nodeName  = "e2e-node"
)

// node is the machine under test, seen from inside its namespaces.
type node struct {
	t      *testing.T
	rep    *e2enode.Report
	dir    string // everything lives beneath it
	root   string // the agent's node root: /run and /var are bound to its run and var
	bin    string // podmin, podmin-agent and the test's programs
	tools  string // kubelet, containerd, runsc, CNI plugins, CoreDNS
	logs   string
	home   string // the podmin CLI's XDG directories
	bucket string
	cgroup string   // the node's cgroup root, e.g. /podmin-e2e-123
	xdg    []string // the CLI's XDG directories, shared with the agent
	env    []string // the CLI's environment
	procs  []*e2enode.Daemon
	cfg    e2enode.Config // the node as its configuration files describe it
	// baseMounts are the IDs of the mounts the node's mount namespace had
	// right after isolate: the machine's (another program's named network
	// namespaces among them) and the node's own /run and /var. The clean
	// checks count only mounts made after them.
	baseMounts map[string]bool
}

// runNode is the test inside the node's namespaces.
func runNode(t *testing.T) {
	dir := os.Getenv(envDir)
	n := &node{t: t, rep: e2enode.OpenReport(t, "e2e", os.Getenv(envReport)), dir: dir, root: filepath.Join(dir, "root"), bin: filepath.Join(dir, "bin"),
		tools: os.Getenv(envTools), logs: filepath.Join(dir, "logs"), home: filepath.Join(dir, "home"),
		bucket: filepath.Join(dir, "bucket"), cgroup: "/" + cgroupName(dir)}
	n.xdg = []string{"XDG_CONFIG_HOME=" + n.home + "/config", "XDG_CACHE_HOME=" + n.home + "/cache",
		"XDG_DATA_HOME=" + n.home + "/data", "XDG_RUNTIME_DIR=" + n.home + "/run"}
	n.env = append(os.Environ(), n.xdg...)
	n.cfg = e2enode.Config{Name: nodeName, Root: n.root, Tools: n.tools, Bin: n.bin, Addr: nodeAddr, Resolver: vpcAddr,
		PodPrefix: podPrefix, Cgroup: n.cgroup}
	start := time.Now()
	must(t, e2enode.RecordNamespaces(dir, 0))
	n.isolate()
	var err error
	n.baseMounts, err = e2enode.MountIDs()
	must(t, err)
	n.network()
	removeCgroups, err := e2enode.MakeCgroupRoot(cgroupName(dir))
	t.Cleanup(func() {
		n.stopAll()
		// After a failure shims and sandboxes may outlive containerd.
		e2enode.KillAll(dir)
		if err := removeCgroups(); err != nil {
			t.Errorf("cgroups: %v", err)
		}
	})
	must(t, err)
	must(t, e2enode.WriteConfigs(n.cfg))
	n.startContainerd()
	n.podmin("connect", cluster, "--provider", "local", "--bucket", n.bucket)
	n.podmin("setup", "--nodegroup", nodegroup, "-y")
	n.startKubelet()
	n.startAgent()
	n.startCoreDNS()
	n.rep.Line(fmt.Sprintf("node up (containerd, kubelet, podmin-agent, CoreDNS; cluster connected and set up) in %s",
		time.Since(start).Round(10*time.Millisecond)))
	n.runProofs()
}

// isolate gives the node a /run (a tmpfs) and a /var of its own, both
// beneath the node root, in the node's private mount namespace.
func (n *node) isolate() {
	t := n.t
	must(t, e2enode.MakePrivate())
	for _, d := range []string{n.logs, n.home, filepath.Join(n.dir, "build")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, e2enode.PrepareRoot(n.root, "1g"))
	must(t, e2enode.BindRoot(n.root))
}

// network brings up the node's interfaces and the vpc namespace.
func (n *node) network() {
	pfx := podPrefix.String()
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"netns", "add", "vpc"},
		{"link", "add", "eth0", "type", "veth", "peer", "name", "up0", "netns", "vpc"},
		{"-6", "addr", "add", nodeAddr.String() + "/64", "dev", "eth0", "nodad"},
		{"link", "set", "eth0", "up"},
		{"-n", "vpc", "link", "set", "lo", "up"},
		{"-n", "vpc", "-6", "addr", "add", vpcAddr.String() + "/64", "dev", "up0", "nodad"},
		{"-n", "vpc", "link", "set", "up0", "up"},
		{"-6", "route", "add", "default", "via", vpcAddr.String(), "dev", "eth0"},
		{"-n", "vpc", "-6", "route", "add", pfx, "via", nodeAddr.String(), "dev", "up0"},
	} {
		n.run("ip", args...)
	}
	must(n.t, os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644))
}

// run runs a command that must succeed.
func (n *node) run(name string, args ...string) string {
	n.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// podmin runs the podmin CLI, which must succeed, and returns its
// standard output.
func (n *node) podmin(args ...string) string {
	n.t.Helper()
	out, err := n.podminErr(nil, args...)
	if err != nil {
		n.t.Fatalf("podmin %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (n *node) podminErr(stdin []byte, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(n.bin, "podmin"), args...)
	cmd.Env = n.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s%s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
