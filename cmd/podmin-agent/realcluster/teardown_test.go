// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"fmt"
	"sync"
	"time"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// teardown stops every daemon, kills what is left of the cluster's
// processes and removes the cgroup roots, reporting what took long.
func (c *cluster) teardown() {
	start := time.Now()
	if c.pods != nil {
		c.pods.stop()
	}
	if c.planes != nil {
		c.planes.stop()
	}
	var wg sync.WaitGroup
	for _, n := range c.allNodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, name := range []string{"coredns", "podmin-agent", "kubelet", "containerd"} {
				if d := n.daemon(name); d != nil && !d.Exited() {
					if err := d.Stop(30 * time.Second); err != nil {
						c.t.Logf("%s: %v", n.id, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	stopped := time.Since(start)
	// Shims and sandboxes outlive containerd; the servers and holders
	// go too.
	e2enode.KillAll(c.dir)
	for _, n := range c.allNodes() {
		if n.h != nil {
			n.h.stop()
		}
		if n.rmCgroup != nil {
			if err := n.rmCgroup(); err != nil {
				c.t.Errorf("%s's cgroups: %v", n.id, err)
			}
		}
	}
	if c.client != nil {
		c.client.stop()
	}
	for _, d := range c.servers {
		if !d.Exited() {
			d.Kill()
		}
	}
	c.rep.Line(fmt.Sprintf("teardown: daemons stopped on SIGTERM in %s, everything else killed and cgroups removed in %s",
		stopped.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond)))
}
