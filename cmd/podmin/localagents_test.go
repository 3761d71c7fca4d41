// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The agent commands local setup prints run side by side for two clusters
// on one machine: real podmin-agent processes, each serving its health
// endpoints (logged once every listener is bound), none refused a port the
// other cluster's agent holds.
func TestLocalAgentsOfTwoClustersRunSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs podmin-agent")
	}
	dir := t.TempDir()
	agent := filepath.Join(dir, "podmin-agent")
	if out, err := exec.Command("go", "build", "-o", agent, "podmin.dev/podmin/cmd/podmin-agent").CombinedOutput(); err != nil {
		t.Fatalf("build podmin-agent: %v\n%s", err, out)
	}
	c := newCLI(t)
	var procs []*agentProc
	for _, cluster := range []string{"alpha", "beta"} {
		c.ok("connect", cluster, "--provider", "local", "--bucket", cluster+"-bucket")
		var res struct {
			LocalAgents []struct{ Command string }
		}
		if err := json.Unmarshal([]byte(c.ok("setup", "--nodegroup", "web", "-y", "-o", "json")), &res); err != nil || len(res.LocalAgents) != 1 {
			t.Fatalf("setup of %s: %v %+v", cluster, err, res)
		}
		procs = append(procs, startPrinted(t, c, agent, res.LocalAgents[0].Command))
	}
	for _, p := range procs {
		p.waitServing(t)
	}
}

// agentProc is one podmin-agent started from a printed command.
type agentProc struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	log     strings.Builder
	serving chan struct{}
	exited  chan error
}

// startPrinted runs a printed "K=V ... podmin-agent ARGS" command with the
// built agent, in the CLI's environment (its data directory holds the
// local secrets the agent reads).
func startPrinted(t *testing.T, c *cli, agent, command string) *agentProc {
	t.Helper()
	fields := strings.Fields(command)
	var env []string
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		env, fields = append(env, fields[0]), fields[1:]
	}
	if len(fields) == 0 || fields[0] != "podmin-agent" {
		t.Fatalf("not an agent command: %s", command)
	}
	p := &agentProc{cmd: exec.Command(agent, fields[1:]...), serving: make(chan struct{}), exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), env...)
	for k, v := range c.env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.Contains(sc.Text(), `msg="serving health endpoints"`) {
				once.Do(func() { close(p.serving) })
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	return p
}

func (p *agentProc) waitServing(t *testing.T) {
	t.Helper()
	select {
	case <-p.serving:
	case err := <-p.exited:
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Fatalf("agent %v exited: %v\n%s", p.cmd.Args, err, p.log.String())
	case <-time.After(60 * time.Second):
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Fatalf("agent %v does not serve its health endpoints:\n%s", p.cmd.Args, p.log.String())
	}
}
