// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/state"
)

// watchScript drives status --watch by events: each pause of the watch
// (on a fake clock that never sleeps) runs the next step, which publishes
// what the leader would. Running out of steps fails the test instead of
// hanging.
func watchScript(t *testing.T, c *cli, steps ...func(ctx context.Context) error) *int {
	pauses := 0
	now := time.Now()
	c.adjust = func(e *builtins.Env) {
		e.Now = func() time.Time { return now }
		e.Sleep = func(ctx context.Context, d time.Duration) error {
			now = now.Add(d)
			if pauses >= len(steps) {
				t.Errorf("the watch paused %d times, more than the %d steps of the test", pauses+1, len(steps))
				return context.Canceled
			}
			pauses++
			return steps[pauses-1](ctx)
		}
	}
	return &pauses
}

func TestStatusWatchPrintsChangesInAPipe(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	f := newFakeLeader(c)
	f.publish(2, 2, state.NotReady, "")
	rev := f.revision()[:12]
	pauses := watchScript(t, c,
		func(ctx context.Context) error {
			// A watch runs until ready or interrupted, not until the
			// default deadline.
			if d, ok := ctx.Deadline(); ok {
				t.Errorf("status --watch has a deadline (%s) without --timeout", d)
			}
			return nil // nothing changed: nothing printed
		},
		func(context.Context) error { return f.tryPublish(2, 2, state.NotReady, "kubelet") },
		func(context.Context) error { return f.tryPublish(2, 2, state.Ready, "") },
	)
	out := c.ok("status", "--watch")
	want := strings.Join([]string{
		"workers/web revision " + rev + ": 2/2 applied, 0/2 ready; not ready: node-0 (not ready), node-1 (not ready)",
		"  workers/web node-0: revision " + rev + ", not-ready",
		"  workers/web node-1: revision " + rev + ", not-ready",
		// The second read changed nothing; the third only node-1 and
		// the deployment's summary.
		"workers/web revision " + rev + ": 2/2 applied, 0/2 ready; not ready: node-0 (not ready); node-1: kubelet error: container web: CrashLoopBackOff",
		"  workers/web node-1: revision " + rev + ", not-ready (container web: CrashLoopBackOff; error (kubelet))",
		"workers/web revision " + rev + ": 2/2 applied, 2/2 ready",
		"  workers/web node-0: revision " + rev + ", ready",
		"  workers/web node-1: revision " + rev + ", ready",
		"all 1 deployment(s) shown are ready",
	}, "\n") + "\n"
	if out != want {
		t.Fatalf("status --watch in a pipe printed\n%s\nwant\n%s", out, want)
	}
	if *pauses != 3 {
		t.Fatalf("the watch paused %d times, want 3 (it ends when ready)", *pauses)
	}
}

func TestStatusWatchInterrupted(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	newFakeLeader(c).publish(2, 2, state.NotReady, "")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	watchScript(t, c, func(context.Context) error {
		// Ctrl-C while the watch waits for the next read.
		cancel(signalError{sig: syscall.SIGINT})
		return context.Cause(ctx)
	})
	var out, errb bytes.Buffer
	code := runWith(ctx, []string{"status", "--watch"}, strings.NewReader(""), &out, &errb, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }, c.adjust)
	if code != 130 || !strings.Contains(errb.String(), "interrupted by SIGINT") {
		t.Fatalf("status --watch interrupted: exit %d, want 130\n%s%s", code, out.String(), errb.String())
	}
}

func TestStatusWatchRefusals(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	c.fails(exitUsage, "pass one of them", "status", "--watch", "--wait")
	c.fails(exitUsage, "use --wait with -o json", "status", "--watch", "-o", "json")
	c.fails(exitNotFound, "not in the deployment index", "status", "nope", "-g", "workers", "--watch")
	// An explicit --timeout still ends a watch (exit 124).
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	watchScript(t, c, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("status --watch --timeout 1m has no deadline")
		}
		return context.DeadlineExceeded
	})
	c.fails(exitDeadline, "", "status", "--watch", "--timeout", "1m")
	c.adjust = nil
	c.ok("delete", "web", "-g", "workers", "-y")
	// Nothing committed: nothing to wait for, the watch ends at once.
	if out := c.ok("status", "--watch"); out != "no deployments committed\n" {
		t.Fatalf("status --watch without deployments: %q", out)
	}
}

// On a terminal each frame replaces the last: the cursor moves up over
// the lines drawn before and clears below; no line is longer than the
// terminal is wide.
func TestWatchRedrawsOnATerminal(t *testing.T) {
	var b bytes.Buffer
	p := &watchPrinter{w: &b, tty: &terminalOut{width: func() int { return 40 }}, poll: time.Second}
	res := func(readiness string) builtins.StatusResult {
		var r builtins.StatusResult
		doc := `{"checkedAt": "2026-01-02T03:04:05Z", "nodegroups": [{"nodegroup": "workers", "deployments": [{"name": "web", "nodegroup": "workers",
			"revision": "0123456789abcdef", "summary": "1/1 applied", "nodes": [{"node": "node-0", "revision": "0123456789abcdef", "readiness": "` + readiness + `"}]}]}]}`
		if err := json.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := p.show(res("not-ready")); err != nil {
		t.Fatal(err)
	}
	first := b.String()
	if strings.Contains(first, "\x1b[") || strings.Count(first, "\n") != 3 {
		t.Fatalf("first frame %q: want 3 lines (head, deployment, node) and no cursor movement", first)
	}
	b.Reset()
	if err := p.show(res("ready")); err != nil {
		t.Fatal(err)
	}
	second := b.String()
	if !strings.HasPrefix(second, "\x1b[3F\x1b[J") || !strings.Contains(second, "node-0: revision 0123456789ab, ready") && !strings.Contains(second, "…") {
		t.Fatalf("second frame %q: want it to move up 3 lines, clear, and redraw", second)
	}
	for _, l := range strings.Split(strings.TrimPrefix(second, "\x1b[3F\x1b[J"), "\n") {
		if n := len([]rune(l)); n >= 40 {
			t.Fatalf("line %q is %d columns on a 40-column terminal", l, n)
		}
	}
}
