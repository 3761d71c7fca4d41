// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/objstore/objstoretest"
)

// Environment of the test. scripts/e2e-cluster.sh sets the first three.
const (
	// envTools is the directory of the node's programs (make node-tools).
	envTools = "PODMIN_E2E_TOOLS"
	// envReport is the file the proofs' result lines are appended to.
	envReport = "PODMIN_E2E_REPORT"
	// envNodes is the number of nodes (default 3, at most 9: inotify
	// allows 128 instances per user, a node takes 9 and another 4b adds
	// one).
	envNodes = "PODMIN_E2E_NODES"
	// envKeep, set to 1, keeps the cluster's directory afterwards.
	envKeep = "PODMIN_E2E_KEEP"
	// envInside and envDir are how the test re-executes itself inside the
	// router's namespaces; envHold makes it a namespace holder.
	envInside = "PODMIN_E2E_CLUSTER_INSIDE"
	envDir    = "PODMIN_E2E_CLUSTER_DIR"
	envHold   = "PODMIN_E2E_CLUSTER_HOLD"
)

// reportName prefixes the report's summary lines.
const reportName = "e2e-cluster"

// TestMain runs the process as a namespace holder when asked to, before
// any test.
func TestMain(m *testing.M) {
	if root := os.Getenv(envHold); root != "" {
		os.Exit(hold(root))
	}
	os.Exit(m.Run())
}

// TestRealCluster runs the cluster inside a network and mount namespace
// of its own, then proves the machine is as it was (proof 7).
func TestRealCluster(t *testing.T) {
	if os.Getenv(envInside) != "" {
		runCluster(t)
		return
	}
	rep := e2enode.OpenReport(t, reportName, os.Getenv(envReport))
	switch {
	case runtime.GOOS != "linux":
		rep.NotRun(t, "the real cluster runs on Linux only")
	case os.Geteuid() != 0:
		rep.NotRun(t, "the real cluster needs root (network and mount namespaces, kubelet, containerd, eBPF): run make e2e-cluster as root")
	}
	tools := os.Getenv(envTools)
	if tools == "" {
		rep.NotRun(t, envTools+" is not set: run make e2e-cluster, which uses the node's programs of make node-tools")
	}
	for _, name := range e2enode.ToolNames {
		if _, err := os.Stat(filepath.Join(tools, name)); err != nil {
			t.Fatalf("%s: %v: run make node-tools", name, err)
		}
	}
	for _, prog := range []string{"ip", "nsenter", "moto_server"} {
		if _, err := exec.LookPath(prog); err != nil {
			rep.NotRun(t, prog+" is not installed: the cluster needs it (ip and nsenter: iproute2 and util-linux; moto_server: pip install 'moto[server]')")
		}
	}
	if n, err := nodeCount(); err != nil {
		t.Fatal(err)
	} else if avail, err := inotifyInstances(); err == nil && avail < 9*(n+1)+10 {
		rep.NotRun(t, fmt.Sprintf("fs.inotify.max_user_instances is %d: %d nodes need about %d (9 each): raise it with sysctl", avail, n, 9*(n+1)+10))
	}
	versitygw := objstoretest.VersityGWBinary(t)
	dir, err := os.MkdirTemp("", "podmin-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e2enode.BuildPrograms(filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	rep.Line(fmt.Sprintf("programs built (podmin, podmin-agent, hello, pause, shimoom) in %s", time.Since(start).Round(100*time.Millisecond)))
	before, err := e2enode.HostState(dir)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestRealCluster$", "-test.v", "-test.timeout=40m")
	cmd.Env = append(os.Environ(), envInside+"=1", envDir+"="+dir, envVersityGW+"="+versitygw)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The cluster gets a network and a mount namespace of its own, the
	// router's: nothing it mounts or creates reaches the machine, and all
	// of it ends with the cluster.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	runErr := cmd.Run()

	rep.Prove(t, "7", "teardown leaves the machine clean, counting only what the cluster created", func(p *e2enode.Proof) {
		after, err := e2enode.HostState(dir)
		if err != nil {
			p.Fatal(err)
		}
		e2enode.KillAll(dir) // whatever the check below names
		if clean := before.Diff(after, ownLink); len(clean) > 0 {
			p.Fatalf("the machine is not as it was once the cluster stopped: %s", strings.Join(clean, "; "))
		}
		p.Figure("no process, mount, network interface or cgroup of the cluster left once it stopped (the cluster's own teardown is in its log)")
	})
	if runErr != nil {
		t.Errorf("the cluster: %v (its logs are in %s/logs)", runErr, dir)
	}
	if t.Failed() || os.Getenv(envKeep) == "1" {
		t.Logf("kept the cluster's directory %s", dir)
	} else if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove %s: %v", dir, err)
	}
	rep.Line(fmt.Sprintf("e2e-cluster duration (programs built, cluster up, proofs, teardown): %s", time.Since(start).Round(time.Second)))
}

// ownLink tells the network interfaces the cluster makes, all in its own
// namespaces: the router's bridge and its ports (n<i>, cl), each node's
// and the client's eth0, and the Pods' veths.
func ownLink(name string) bool {
	if name == "br0" || name == "cl" || name == "eth0" || strings.HasPrefix(name, "veth") {
		return true
	}
	_, err := strconv.Atoi(strings.TrimPrefix(name, "n"))
	return strings.HasPrefix(name, "n") && err == nil
}

// envVersityGW passes the S3 server's binary to the inside.
const envVersityGW = "PODMIN_E2E_CLUSTER_VERSITYGW"

// nodeCount is envNodes, 3 by default.
func nodeCount() (int, error) {
	v := os.Getenv(envNodes)
	if v == "" {
		return 3, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > 9 {
		return 0, fmt.Errorf("%s=%q: give a number of nodes from 2 to 9", envNodes, v)
	}
	return n, nil
}

// inotifyInstances is the per-user inotify instance limit.
func inotifyInstances() (int, error) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
