// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment of the test. scripts/e2e.sh sets the first two.
const (
	// envTools is the directory of the node's programs (make tools).
	envTools = "PODMIN_E2E_TOOLS"
	// envReport is the file the proofs' result lines are appended to.
	envReport = "PODMIN_E2E_REPORT"
	// envKeep, set to 1, keeps the node's directory afterwards.
	envKeep = "PODMIN_E2E_KEEP"
	// envOnly, a comma-separated list of proof numbers, runs only those
	// (and the first four and the last, which the others need), for
	// working on one proof.
	envOnly = "PODMIN_E2E_ONLY"
	// envInside and envDir are how the test re-executes itself inside the
	// node's namespaces.
	envInside = "PODMIN_E2E_INSIDE"
	envDir    = "PODMIN_E2E_DIR"
)

// toolNames are the programs make tools builds for the node.
var toolNames = []string{"kubelet", "containerd", "ctr", "runsc", "containerd-shim-runsc-v1", "coredns",
	"cni/ptp", "cni/host-local", "cni/loopback"}

// TestRealNode runs the node in namespaces of its own, then checks that
// the machine is as it was: no process, mount, interface or cgroup left.
func TestRealNode(t *testing.T) {
	if os.Getenv(envInside) != "" {
		runNode(t)
		return
	}
	rep := openReport(t)
	switch {
	case runtime.GOOS != "linux":
		rep.notRun(t, "the real node runs on Linux only")
	case os.Geteuid() != 0:
		rep.notRun(t, "the real node needs root (network and mount namespaces, kubelet, containerd, eBPF): run make e2e as root")
	}
	tools := os.Getenv(envTools)
	if tools == "" {
		rep.notRun(t, envTools+" is not set: run make e2e, which builds the node's programs with make tools")
	}
	for _, name := range toolNames {
		if _, err := os.Stat(filepath.Join(tools, name)); err != nil {
			t.Fatalf("%s: %v: run make tools", name, err)
		}
	}
	dir, err := os.MkdirTemp("", "podmin-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	buildPrograms(t, filepath.Join(dir, "bin"))
	before := hostState(t, dir)

	cmd := exec.Command(os.Args[0], "-test.run=^TestRealNode$", "-test.v", "-test.timeout=25m")
	cmd.Env = append(os.Environ(), envInside+"=1", envDir+"="+dir)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The node gets a network and a mount namespace of its own: nothing
	// it mounts or creates reaches the machine, and all of it ends with
	// the node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	runErr := cmd.Run()

	after := hostState(t, dir)
	killNode(dir) // whatever the report below names
	clean := before.diff(after)
	if len(clean) == 0 {
		rep.line("machine clean after the node stopped: no process, mount, network interface or cgroup left")
	} else {
		rep.line("machine NOT clean after the node stopped: " + strings.Join(clean, "; "))
		t.Errorf("the machine is not as it was: %s", strings.Join(clean, "; "))
	}
	if runErr != nil {
		t.Errorf("the node: %v (its logs are in %s/logs)", runErr, dir)
	}
	if t.Failed() || os.Getenv(envKeep) == "1" {
		t.Logf("kept the node's directory %s", dir)
	} else if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove %s: %v", dir, err)
	}
	rep.line(fmt.Sprintf("e2e duration (programs built, node up, proofs, teardown): %s", time.Since(start).Round(time.Second)))
}

// buildPrograms builds podmin, podmin-agent and the test's own programs,
// static, as the workload and sandbox images need them.
func buildPrograms(t *testing.T, bin string) {
	t.Helper()
	must(t, os.MkdirAll(bin, 0o755))
	const self = "podmin.dev/podmin/cmd/podmin-agent/realnode/"
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "podmin.dev/podmin/cmd/podmin", "podmin.dev/podmin/cmd/podmin-agent",
		self+"hello", self+"pause", self+"shimoom")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the programs: %v\n%s", err, out)
	}
}

// machine is what the node may leave behind on the machine.
type machine struct {
	links, mounts, procs, cgroups []string
}

func hostState(t *testing.T, dir string) machine {
	t.Helper()
	var m machine
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		m.links = append(m.links, l.Name())
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), dir) || strings.Contains(sc.Text(), cgroupName(dir)) {
			m.mounts = append(m.mounts, sc.Text())
		}
	}
	for _, pid := range nodeProcesses(dir) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		m.procs = append(m.procs, fmt.Sprintf("%d %s", pid, exe))
	}
	m.cgroups, _ = filepath.Glob("/sys/fs/cgroup/*/" + cgroupName(dir))
	if cg, err := filepath.Glob("/sys/fs/cgroup/" + cgroupName(dir)); err == nil {
		m.cgroups = append(m.cgroups, cg...)
	}
	return m
}

// nsFile is where the node records its namespaces for the outer test.
func nsFile(dir string) string { return filepath.Join(dir, "namespaces") }

// recordNamespaces writes the calling process's network and mount
// namespaces, the node's, to nsFile.
func recordNamespaces(dir string) error {
	var ids []string
	for _, ns := range []string{"net", "mnt"} {
		id, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	return os.WriteFile(nsFile(dir), []byte(strings.Join(ids, "\n")), 0o644)
}

// nodeProcesses lists the processes that belong to the node: those in its
// network or mount namespace or its cgroup root (sandboxes have
// namespaces of their own, but live in its cgroups), and any running a
// program beneath its directory.
func nodeProcesses(dir string) []int {
	var ids []string
	if b, err := os.ReadFile(nsFile(dir)); err == nil {
		ids = strings.Fields(string(b))
	}
	self := os.Getpid()
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		base := "/proc/" + e.Name()
		mine := false
		for _, ns := range []string{"net", "mnt"} {
			if id, err := os.Readlink(base + "/ns/" + ns); err == nil && slices.Contains(ids, id) {
				mine = true
			}
		}
		if cg, err := os.ReadFile(base + "/cgroup"); err == nil && strings.Contains(string(cg), "/"+cgroupName(dir)+"/") {
			mine = true
		}
		if exe, err := os.Readlink(base + "/exe"); err == nil && strings.HasPrefix(exe, dir+"/") {
			mine = true
		}
		if mine {
			out = append(out, pid)
		}
	}
	return out
}

// killNode kills what is left of the node's processes.
func killNode(dir string) {
	for _, pid := range nodeProcesses(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// diff names what after has that before had not.
func (before machine) diff(after machine) []string {
	var out []string
	for _, l := range after.links {
		if !slices.Contains(before.links, l) {
			out = append(out, "network interface "+l)
		}
	}
	for _, m := range after.mounts {
		out = append(out, "mount "+m)
	}
	for _, p := range after.procs {
		out = append(out, "process "+p)
	}
	for _, c := range after.cgroups {
		out = append(out, "cgroup "+c)
	}
	return out
}

// cgroupName is the node's cgroup root beneath every hierarchy.
func cgroupName(dir string) string { return filepath.Base(dir) }
