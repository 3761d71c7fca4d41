// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"podmin.dev/podmin/bpf"
)

// envOwner makes the test binary a dataplane owner process instead of
// running tests: an agent whose death the restart tests measure.
const envOwner = "PODMIN_TEST_DATAPLANE_OWNER"

// ownerSpec is what an owner process programs.
type ownerSpec struct {
	NetNS, PinPath string
	Limits         bpf.Limits
	Backends       []netip.Addr
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(envOwner); spec != "" {
		os.Exit(runOwner(spec))
	}
	os.Exit(m.Run())
}

// runOwner loads, renews and programs a dataplane as the agent does, says
// "ready" and holds it until its stdin closes or it is killed.
func runOwner(spec string) int {
	var s ownerSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: s.NetNS, PinPath: s.PinPath, Limits: s.Limits})
	if err == nil {
		err = dp.Renew(time.Now().Add(time.Hour))
	}
	if err == nil {
		err = dp.Apply(context.Background(), []Service{service(s.Backends...)})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// owner is a running owner process.
type owner struct {
	cmd  *exec.Cmd
	done chan error
}

// startOwner runs an owner process and waits until its dataplane is
// programmed.
func startOwner(t *testing.T, s ownerSpec) *owner {
	t.Helper()
	spec, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envOwner+"="+string(spec))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &owner{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line == "ready\n"
		_, _ = io.Copy(io.Discard, stdout)
		o.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		<-o.done
	})
	if !<-ready {
		t.Fatalf("the owner process did not program its dataplane: %s", stderr.String())
	}
	return o
}

// kill ends the owner with SIGKILL, as a crash or the OOM killer would:
// nothing of it runs any more when kill returns.
func (o *owner) kill(t *testing.T) {
	t.Helper()
	if err := o.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-o.done
	o.done <- err
	if ws, ok := o.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the owner ended with %v, want SIGKILL", err)
	}
}

// stream opens new connections to a VIP one after another, each asking
// one line, from the client namespace, and counts what fails.
type stream struct {
	mu         sync.Mutex
	attempts   int
	failures   int
	firstErr   error
	lastOK     time.Time
	longestGap time.Duration
	// failed are the spans of the failed connections, from dial to end.
	failed []span
	stop   chan struct{}
	done   chan error
}

// span is when a connection began and ended.
type span struct{ from, to time.Time }

// streamWorkers is how many connections a stream may have under way at
// once: a connection that waits for a timeout does not stop the others.
const streamWorkers = 8

// startStream starts a new connection every interval, from
// streamWorkers sockets' worth of clients, until the test ends or halt.
func (tp *topology) startStream(t *testing.T, to netip.AddrPort, interval time.Duration) *stream {
	t.Helper()
	s := &stream{stop: make(chan struct{}), done: make(chan error, 1)}
	tick := time.NewTicker(interval)
	errs := make(chan error, streamWorkers)
	for range streamWorkers {
		go func() {
			// Sockets are made in the namespace of the thread that makes
			// them, so each worker stays on one inside the client's.
			errs <- inNetNS(tp.nsPath(tp.client), func() error {
				for {
					select {
					case <-s.stop:
						return nil
					case <-tick.C:
					}
					s.one(to)
				}
			})
		}()
	}
	go func() {
		var all []error
		for range streamWorkers {
			all = append(all, <-errs)
		}
		tick.Stop()
		s.done <- errors.Join(all...)
	}()
	t.Cleanup(func() { s.halt() })
	return s
}

func (s *stream) one(to netip.AddrPort) {
	began := time.Now()
	c, err := net.DialTimeout("tcp6", to.String(), 2*time.Second)
	if err == nil {
		_, err = ask(c)
		c.Close()
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if err != nil {
		s.failures++
		s.failed = append(s.failed, span{began, now})
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	if !s.lastOK.IsZero() && now.Sub(s.lastOK) > s.longestGap {
		s.longestGap = now.Sub(s.lastOK)
	}
	s.lastOK = now
}

// halt stops the stream and waits for its last connection.
func (s *stream) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	err := <-s.done
	s.done <- err
}

// failedOutside counts the failed connections that were not under way at
// any moment between from and to.
func (s *stream) failedOutside(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.failed {
		if f.to.Before(from) || f.from.After(to) {
			n++
		}
	}
	return n
}

// counts returns the attempts and failures so far.
func (s *stream) counts() (attempts, failures int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts, s.failures
}

// waitAttempts waits until n more connections than now were attempted.
func (s *stream) waitAttempts(t *testing.T, n int) {
	t.Helper()
	from, _ := s.counts()
	waitFor(t, fmt.Sprintf("%d more connections through the VIP", n), func() bool {
		a, _ := s.counts()
		return a >= from+n
	})
}

// bpffs mounts a bpf filesystem of its own on a temporary directory for
// the test and returns the pin path beneath it.
func bpffs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Skipf("cannot mount a bpf filesystem (needs root and a kernel with bpffs): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir + "/podmin"
}
