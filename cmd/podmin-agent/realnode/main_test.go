// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
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

// TestRealNode runs the node in namespaces of its own, then checks that
// the machine is as it was: no process, mount, interface or cgroup left.
func TestRealNode(t *testing.T) {
	if os.Getenv(envInside) != "" {
		runNode(t)
		return
	}
	rep := e2enode.OpenReport(t, "e2e", os.Getenv(envReport))
	switch {
	case runtime.GOOS != "linux":
		rep.NotRun(t, "the real node runs on Linux only")
	case os.Geteuid() != 0:
		rep.NotRun(t, "the real node needs root (network and mount namespaces, kubelet, containerd, eBPF): run make e2e as root")
	}
	tools := os.Getenv(envTools)
	if tools == "" {
		rep.NotRun(t, envTools+" is not set: run make e2e, which builds the node's programs with make tools")
	}
	for _, name := range e2enode.ToolNames {
		if _, err := os.Stat(filepath.Join(tools, name)); err != nil {
			t.Fatalf("%s: %v: run make tools", name, err)
		}
	}
	dir, err := os.MkdirTemp("", "podmin-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e2enode.BuildPrograms(filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	before, err := e2enode.HostState(dir)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestRealNode$", "-test.v", "-test.timeout=25m")
	cmd.Env = append(os.Environ(), envInside+"=1", envDir+"="+dir)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The node gets a network and a mount namespace of its own: nothing
	// it mounts or creates reaches the machine, and all of it ends with
	// the node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	runErr := cmd.Run()

	after, err := e2enode.HostState(dir)
	if err != nil {
		t.Fatal(err)
	}
	e2enode.KillAll(dir) // whatever the report below names
	clean := before.Diff(after, ownLink)
	if len(clean) == 0 {
		rep.Line("machine clean after the node stopped: no process, mount, network interface or cgroup left")
	} else {
		rep.Line("machine NOT clean after the node stopped: " + strings.Join(clean, "; "))
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
	rep.Line(fmt.Sprintf("e2e duration (programs built, node up, proofs, teardown): %s", time.Since(start).Round(time.Second)))
}

// ownLink tells the network interfaces the node makes, all in its own
// namespaces: eth0 and the vpc's up0, and its Pods' veths.
func ownLink(name string) bool {
	return name == "eth0" || name == "up0" || strings.HasPrefix(name, "veth")
}

// cgroupName is the node's cgroup root beneath every hierarchy.
func cgroupName(dir string) string { return e2enode.CgroupName(dir) }
