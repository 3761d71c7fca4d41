// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	rep    *report
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
	procs  []*daemon
	// baseMounts are the IDs of the mounts the node's mount namespace had
	// right after isolate: the machine's (another program's named network
	// namespaces among them) and the node's own /run and /var. The clean
	// checks count only mounts made after them.
	baseMounts map[string]bool
}

// runNode is the test inside the node's namespaces.
func runNode(t *testing.T) {
	dir := os.Getenv(envDir)
	n := &node{t: t, rep: openReport(t), dir: dir, root: filepath.Join(dir, "root"), bin: filepath.Join(dir, "bin"),
		tools: os.Getenv(envTools), logs: filepath.Join(dir, "logs"), home: filepath.Join(dir, "home"),
		bucket: filepath.Join(dir, "bucket"), cgroup: "/" + cgroupName(dir)}
	n.xdg = []string{"XDG_CONFIG_HOME=" + n.home + "/config", "XDG_CACHE_HOME=" + n.home + "/cache",
		"XDG_DATA_HOME=" + n.home + "/data", "XDG_RUNTIME_DIR=" + n.home + "/run"}
	n.env = append(os.Environ(), n.xdg...)
	start := time.Now()
	must(t, recordNamespaces(dir))
	n.isolate()
	n.baseMounts = mountIDs(t)
	n.network()
	removeCgroups := n.makeCgroupRoot()
	t.Cleanup(func() {
		n.stopAll()
		// After a failure shims and sandboxes may outlive containerd.
		if left := nodeProcesses(dir); len(left) > 0 {
			killNode(dir)
			waitGone(left)
		}
		if err := removeCgroups(); err != nil {
			t.Errorf("cgroups: %v", err)
		}
	})
	n.writeConfigs()
	n.startContainerd()
	n.podmin("connect", cluster, "--provider", "local", "--bucket", n.bucket)
	n.podmin("setup", "--nodegroup", nodegroup, "-y")
	n.startKubelet()
	n.startAgent()
	n.startCoreDNS()
	n.rep.line(fmt.Sprintf("node up (containerd, kubelet, podmin-agent, CoreDNS; cluster connected and set up) in %s",
		time.Since(start).Round(10*time.Millisecond)))
	n.runProofs()
}

// isolate gives the node a /run (a tmpfs) and a /var of its own, both
// beneath the node root, in the node's private mount namespace.
func (n *node) isolate() {
	t := n.t
	// The new mount namespace shares the machine's propagation: make it
	// private before mounting anything.
	must(t, unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""))
	for _, d := range []string{"run", "var/lib", "var/log", "var/tmp", "etc/podmin/manifests", "etc/kubernetes",
		"etc/containerd/certs.d/registry.podmin.internal", "etc/cni/net.d", "etc/coredns"} {
		must(t, os.MkdirAll(filepath.Join(n.root, d), 0o755))
	}
	for _, d := range []string{n.logs, n.home, filepath.Join(n.dir, "build")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.Chmod(filepath.Join(n.root, "var/tmp"), 0o1777))
	must(t, os.Symlink("../run", filepath.Join(n.root, "var/run")))
	must(t, os.Symlink("../run/lock", filepath.Join(n.root, "var/lock")))
	must(t, unix.Mount("tmpfs", filepath.Join(n.root, "run"), "tmpfs", 0, "mode=0755"))
	// containerd's root is a filesystem of its own, so a proof can fill
	// it without touching the machine's disk.
	must(t, os.MkdirAll(filepath.Join(n.root, "var/lib/containerd"), 0o700))
	must(t, unix.Mount("tmpfs", filepath.Join(n.root, "var/lib/containerd"), "tmpfs", 0, "mode=0700,size=1g"))
	must(t, unix.Mount(filepath.Join(n.root, "run"), "/run", "", unix.MS_BIND|unix.MS_REC, ""))
	// A bpffs of the node's own, where the agent pins its dataplane so
	// that a restarted agent adopts it; it goes with the mount namespace.
	bpffs := filepath.Join(n.root, "sys/fs/bpf")
	must(t, os.MkdirAll(bpffs, 0o755))
	must(t, unix.Mount("bpf", bpffs, "bpf", 0, "mode=0700"))
	must(t, unix.Mount(filepath.Join(n.root, "var"), "/var", "", unix.MS_BIND|unix.MS_REC, ""))
}

// mountIDs are the IDs of the calling process's mounts (the first field of
// /proc/self/mountinfo).
func mountIDs(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out[f[0]] = true
		}
	}
	return out
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

// makeCgroupRoot creates the node's cgroup root in every hierarchy (kubelet
// wants it to exist) and returns its removal, which fails if anything is
// left in it.
func (n *node) makeCgroupRoot() func() error {
	t := n.t
	var dirs []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dirs = []string{"/sys/fs/cgroup" + n.cgroup} // unified
	} else {
		hs, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
		for _, h := range hs {
			dirs = append(dirs, filepath.Dir(h)+n.cgroup)
		}
	}
	for _, d := range dirs {
		must(t, os.Mkdir(d, 0o755))
		// A cgroup v1 cpuset starts empty: give it its parent's CPUs and
		// memory nodes, or no task can join it.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
				must(t, os.WriteFile(filepath.Join(d, f), v, 0o644))
			}
		}
	}
	return func() error {
		var errs []error
		for _, d := range dirs {
			errs = append(errs, removeCgroup(d))
		}
		return errors.Join(errs...)
	}
}

// removeCgroup removes a cgroup directory tree, deepest first; a cgroup
// that still has tasks refuses and is reported.
func removeCgroup(dir string) error {
	var subdirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			subdirs = append(subdirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(subdirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(subdirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", subdirs[i], err))
		}
	}
	return errors.Join(errs...)
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

// waitGone waits up to ten seconds for killed processes to disappear.
func waitGone(pids []int) {
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}
