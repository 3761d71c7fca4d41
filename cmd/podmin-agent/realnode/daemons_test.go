// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// Node paths as a node sees them: /run and /var are the node root's.
const (
	containerdSock = e2enode.ContainerdSock
	podsAPISock    = e2enode.PodsAPISock
	runscRoot      = e2enode.RunscRoot
)

// start runs a daemon of the node; the test stops it at the end.
func (n *node) start(name string, env []string, argv ...string) *e2enode.Daemon {
	n.t.Helper()
	d, err := e2enode.Start(n.logs, name, nil, env, argv...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.procs = append(n.procs, d)
	return d
}

// stopAll stops the daemons in reverse start order.
func (n *node) stopAll() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		if err := n.procs[i].Stop(30 * time.Second); err != nil {
			n.t.Errorf("stop: %v", err)
		}
	}
	n.procs = nil
}

// waitFor polls cond until it holds; on timeout t fails with the logs of
// every daemon.
func (n *node) waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			var logs []string
			for _, d := range n.procs {
				logs = append(logs, d.Tail())
			}
			t.Fatalf("not within %s: %s\n%s", limit, what, strings.Join(logs, "\n"))
		}
		for _, d := range n.procs {
			if d.Exited() {
				t.Fatalf("%s exited (%v) while waiting for %s\n%s", d.Name, d.Err(), what, d.Tail())
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func (n *node) startContainerd() {
	n.start("containerd", e2enode.ContainerdEnv(n.cfg, n.logs), e2enode.ContainerdArgs(n.cfg)...)
	n.waitFor(n.t, time.Minute, "containerd's socket", func() bool { return e2enode.IsSocket(containerdSock) })
}

func (n *node) startKubelet() {
	n.start("kubelet", nil, e2enode.KubeletArgs(n.cfg)...)
	n.waitFor(n.t, 2*time.Minute, "kubelet's Pods API socket", func() bool { return e2enode.IsSocket(podsAPISock) })
}

// agent is podmin-agent's daemon.
func (n *node) agent() *e2enode.Daemon { return n.daemon("podmin-agent") }

func (n *node) daemon(name string) *e2enode.Daemon {
	for _, d := range n.procs {
		if d.Name == name {
			return d
		}
	}
	n.t.Fatalf("no daemon %s", name)
	return nil
}

func (n *node) startAgent() {
	env := append(slices.Clone(n.xdg), "PODMIN_ROOT="+n.root, "PODMIN_AGENT_DATAPLANE=on",
		"PODMIN_AGENT_NODE_ADDR="+nodeAddr.String(), "PODMIN_AGENT_NODE_ID=e2e-node")
	d := n.start("podmin-agent", env, filepath.Join(n.bin, "podmin-agent"), "--provider", "local", "--bucket", n.bucket,
		"--region", "local", "--cluster", cluster, "--nodegroup", nodegroup, "--ipv6-prefix", podPrefix.String())
	n.waitFor(n.t, time.Minute, "the agent's health endpoints and Service DNS", func() bool {
		l := d.LogText()
		return strings.Contains(l, "serving health endpoints") && strings.Contains(l, "serving service DNS")
	})
}

func (n *node) startCoreDNS() {
	n.start("coredns", nil, e2enode.CoreDNSArgs(n.cfg)...)
	n.waitFor(n.t, time.Minute, "CoreDNS answering the cluster domain from the agent's zone file", func() bool {
		_, rcode, err := e2enode.Lookup(net.JoinHostPort(nodeAddr.String(), "53"), "nothing.default.svc.cluster.local")
		return err == nil && rcode == dns.RcodeNameError
	})
}
