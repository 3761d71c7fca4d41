// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package election_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/objstore/local"
)

// processTiming is the default lease arithmetic at a pace a test can wait
// for with real processes and a real clock.
var processTiming = election.Timing{Renew: 100 * time.Millisecond, Timeout: 600 * time.Millisecond, Hold: 400 * time.Millisecond, Retry: 50 * time.Millisecond}

const childEnv = "PODMIN_ELECTION_TEST_CHILD"

func TestMain(m *testing.M) {
	if id := os.Getenv(childEnv); id != "" {
		os.Exit(runChild(id, os.Getenv("PODMIN_ELECTION_TEST_BUCKET")))
	}
	os.Exit(m.Run())
}

// runChild is one agent process: it prints every lease it holds as
// "valid <id> <sent> <until>" (Unix nanoseconds) and resigns on SIGTERM.
func runChild(id, dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	emit := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	e, err := election.New(election.Options{
		ID: id, Addr: "[2001:db8::1]:8081", Store: local.Open(dir), Timing: processTiming,
		OnAcquire: func(_ context.Context, t election.Term) error {
			emit("acquire %s %d", id, t.Since.UnixNano())
			return nil
		},
		OnLose: func(_ election.Term, reason string) { emit("lose %s %d", id, time.Now().UnixNano()) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx)
	}()
	last := time.Time{}
	for {
		select {
		case <-done:
			emit("exit %s %d", id, time.Now().UnixNano())
			return 0
		case <-time.After(2 * time.Millisecond):
		}
		if u := e.ValidUntil(); !u.IsZero() && !u.Equal(last) {
			last = u
			emit("valid %s %d %d", id, u.Add(-processTiming.Hold).UnixNano(), u.UnixNano())
		}
	}
}

// line is one event from a child.
type line struct {
	kind, id string
	a, b     int64
}

type procs struct {
	t      *testing.T
	dir    string
	cmds   map[string]*exec.Cmd
	events chan line
	mu     sync.Mutex
	all    []line
}

func (p *procs) start(id string) {
	p.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+id, "PODMIN_ELECTION_TEST_BUCKET="+p.dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmds[id] = cmd
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			l := line{kind: f[0], id: f[1]}
			l.a, _ = strconv.ParseInt(f[2], 10, 64)
			if len(f) > 3 {
				l.b, _ = strconv.ParseInt(f[3], 10, 64)
			}
			p.mu.Lock()
			p.all = append(p.all, l)
			p.mu.Unlock()
			p.events <- l
		}
	}()
}

// next waits for an event of kind from a process other than not.
func (p *procs) next(kind, not string, limit time.Duration) line {
	p.t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case l := <-p.events:
			if l.kind == kind && l.id != not {
				return l
			}
		case <-deadline:
			p.t.Fatalf("no %s event within %s", kind, limit)
		}
	}
}

// TestThreeProcesses runs the election in three real processes on one
// local bucket: a SIGTERM resignation is taken over within about one
// renew interval, a SIGKILLed leader within Timeout + Renew, and no two
// processes ever hold overlapping leases.
func TestThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := filepath.Join(t.TempDir(), "bucket")
	if err := local.Open(dir).CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := &procs{t: t, dir: dir, cmds: map[string]*exec.Cmd{}, events: make(chan line, 10000)}
	t.Cleanup(func() {
		for _, c := range p.cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
	for _, id := range []string{"a", "b", "c"} {
		p.start(id)
	}
	first := p.next("acquire", "", 10*time.Second)
	time.Sleep(500 * time.Millisecond)

	// SIGTERM: the leader resigns and another process takes over.
	resigned := time.Now()
	if err := p.cmds[first.id].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second := p.next("acquire", first.id, 5*time.Second)
	took := time.Duration(second.a - resigned.UnixNano())
	t.Logf("SIGTERM: %s took over %s after the signal (renew interval %s)", second.id, took, processTiming.Renew)
	if took > 2*processTiming.Renew+100*time.Millisecond {
		t.Errorf("takeover after a resignation took %s, want about one renew interval (%s)", took, processTiming.Renew)
	}
	if err := p.cmds[first.id].Wait(); err != nil {
		t.Errorf("resigned process exit: %v", err)
	}
	p.start(first.id)
	time.Sleep(500 * time.Millisecond)

	// SIGKILL: nobody resigns; a follower waits out the lease.
	if err := p.cmds[second.id].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmds[second.id].Wait()
	time.Sleep(20 * time.Millisecond) // let its last lines be read
	p.mu.Lock()
	var lastSent int64
	for _, l := range p.all {
		if l.kind == "valid" && l.id == second.id {
			lastSent = l.a
		}
	}
	p.mu.Unlock()
	third := p.next("acquire", second.id, 10*time.Second)
	failover := time.Duration(third.a - lastSent)
	t.Logf("SIGKILL: %s took over %s after the last renewal was sent (bound %s + %s)", third.id, failover, processTiming.Timeout, processTiming.Renew)
	if failover <= processTiming.Timeout || failover > processTiming.Timeout+processTiming.Renew+200*time.Millisecond {
		t.Errorf("failover took %s", failover)
	}
	time.Sleep(300 * time.Millisecond)
	for id, c := range p.cmds {
		if id != second.id {
			c.Process.Signal(syscall.SIGTERM)
			c.Wait()
		}
	}
	p.cmds = nil

	// No two processes' leases overlap: every lease a process held runs
	// from the send time of its write to that time plus Hold, or to when
	// it gave the lease up.
	p.mu.Lock()
	defer p.mu.Unlock()
	type lease struct {
		id          string
		from, until int64
	}
	// A lease ends early when its holder gives it up (resignation).
	var leases []lease
	for i, l := range p.all {
		if l.kind != "valid" {
			continue
		}
		until := l.b
		for _, later := range p.all[i+1:] {
			if later.id == l.id && (later.kind == "lose" || later.kind == "exit") {
				until = min(until, later.a)
				break
			}
		}
		leases = append(leases, lease{l.id, l.a, until})
	}
	if len(leases) < 10 {
		t.Fatalf("only %d leases recorded", len(leases))
	}
	for i, x := range leases {
		for _, y := range leases[i+1:] {
			if x.id != y.id && x.from < y.until && y.from < x.until {
				t.Errorf("%s's lease [%d, %d] overlaps %s's [%d, %d]", x.id, x.from, x.until, y.id, y.from, y.until)
			}
		}
	}
}
