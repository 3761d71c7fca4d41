// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// idleWindow is how long the idle cluster's CPU time is measured.
const idleWindow = 10 * time.Second

// idle reports the memory (proportional set size, so shared pages count
// once) and CPU of the idle cluster, per node and for the shared servers.
func (r *run) idle(p *e2enode.Proof) {
	before := r.usage()
	time.Sleep(idleWindow) // the measurement window
	after := r.usage()
	var parts []string
	var mem, cpu float64
	for _, who := range append(ids(r.liveNodes(workers)), "servers") {
		b, a := before[who], after[who]
		c := float64(a.ticks-b.ticks) / 100 / idleWindow.Seconds() * 100
		parts = append(parts, fmt.Sprintf("%s %.0f MiB %.1f%%", who, float64(a.pss)/(1<<20), c))
		mem += float64(a.pss)
		cpu += c
	}
	p.Figure("idle cluster with one web Pod per node: %.2f GiB, %.1f%% of one core over %s (%s; a node is containerd, kubelet, podmin-agent, CoreDNS, shims and sandboxes; servers are versitygw and moto)",
		mem/(1<<30), cpu, idleWindow, strings.Join(parts, ", "))
}

type use struct {
	pss   int64 // bytes
	ticks int64 // user and system clock ticks
}

// usage sums the memory and CPU time of the cluster's processes by node
// (a process in the node's network namespace or cgroup root) and for
// the rest ("servers").
func (r *run) usage() map[string]use {
	out := map[string]use{}
	netns := map[string]string{}
	for _, n := range r.liveNodes(workers) {
		if id, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", n.h.pid())); err == nil {
			netns[id] = n.id
		}
	}
	for _, pid := range e2enode.Processes(r.dir) {
		base := fmt.Sprintf("/proc/%d", pid)
		who := "servers"
		if id, err := os.Readlink(base + "/ns/net"); err == nil && netns[id] != "" {
			who = netns[id]
		}
		if cg, err := os.ReadFile(base + "/cgroup"); err == nil {
			for _, n := range r.liveNodes(workers) {
				if strings.Contains(string(cg), n.cfg.Cgroup+"/") {
					who = n.id
				}
			}
		}
		u := out[who]
		u.pss += pss(base)
		u.ticks += ticks(base)
		out[who] = u
	}
	return out
}

// pss is a process's proportional set size in bytes, 0 when unknown.
func pss(base string) int64 {
	b, err := os.ReadFile(base + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// ticks is a process's user and system time in clock ticks.
func ticks(base string) int64 {
	b, err := os.ReadFile(base + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields count from its end.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}
