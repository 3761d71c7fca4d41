// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// shortConnections opens n connections from the client namespace to to,
// each of which the server closes first after one byte, and returns how
// many failed (a connect or the read timed out after 3 s, or broke) and
// how long they took. The loop runs on one thread in the namespace.
func (tp *topology) shortConnections(tb testing.TB, to netip.AddrPort, n int) (failed int, took time.Duration, firstErr error) {
	tb.Helper()
	tp.in(tb, tp.client, func() error {
		start := time.Now()
		for range n {
			if err := shortConnection(to); err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		took = time.Since(start)
		return nil
	})
	return failed, took, firstErr
}

// shortConnection connects to a server that writes one byte and closes,
// reads to the end, and closes.
func shortConnection(to netip.AddrPort) error {
	c, err := net.DialTimeout("tcp6", to.String(), 3*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != "x" {
		return fmt.Errorf("read %q, want x", b)
	}
	return nil
}

// timeWaits counts the TCP sockets in TIME_WAIT on local port lport in
// namespace ns.
func (tp *topology) timeWaits(tb testing.TB, ns string, lport uint16) int {
	tb.Helper()
	n := 0
	tp.in(tb, ns, func() error {
		f, err := os.Open("/proc/thread-self/net/tcp6")
		if err != nil {
			return err
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		want := fmt.Sprintf(":%04X", lport)
		for s.Scan() {
			// sl local_address rem_address st ...
			fields := strings.Fields(s.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "06" {
				n++
			}
		}
		return s.Err()
	})
	return n
}

// TestServerClosesFirst makes more short connections through the VIP
// than there are NAT ports, with the backend closing each first, so that
// it holds every one in TIME_WAIT and ignores resets there
// (tcp_rfc1337): no connection may fail, because a NAT port goes to a
// new client only when the backend accepts that client's SYN in
// TIME_WAIT. Without timestamps on the client, only sequence numbers
// tell. The rate through the VIP and directly is logged;
// BenchmarkVIPInterleaved compares them.
func TestServerClosesFirst(t *testing.T) {
	const n = 3000 // more than the 2768 NAT ports
	for _, tc := range []struct {
		name, tag  string
		timestamps bool
	}{{"timestamps", "t", true}, {"no timestamps", "u", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.tag)
			run(t, "ip", "netns", "exec", f.b1, "sysctl", "-qw", "net.ipv4.tcp_rfc1337=1")
			if !tc.timestamps {
				run(t, "ip", "netns", "exec", f.client, "sysctl", "-qw", "net.ipv4.tcp_timestamps=0")
			}
			f.apply(t, service(backend1))

			failed, took, err := f.shortConnections(t, netip.AddrPortFrom(vip, closerPort), n)
			if failed > 0 {
				t.Errorf("%d of %d connections through the VIP failed; the first: %v", failed, n, err)
			}
			s := f.stats(t)
			if s.Drops[DropNATExhausted] != 0 || s.Drops[DropNoFlow] != 0 {
				t.Errorf("drops %v, want no NAT exhaustion and no flowless segments", s.Drops)
			}
			// The backend holds the node's connections in TIME_WAIT, on
			// fewer NAT ports than there were connections: within the
			// minute, ports were given to new clients while in it.
			tw := f.timeWaits(t, f.b1, closerPort)
			if took < time.Minute && (tw == 0 || tw >= n) {
				t.Errorf("the backend holds %d connections from the node in TIME_WAIT after %d; want some, fewer than the connections", tw, n)
			}
			if !tc.timestamps {
				t.Logf("%d connections through the VIP at %.0f/s; the backend held %d NAT ports in TIME_WAIT", n, float64(n)/took.Seconds(), tw)
				return
			}
			directFailed, directTook, err := f.shortConnections(t, netip.AddrPortFrom(backend1, closerPort), n)
			if directFailed > 0 {
				t.Errorf("%d of %d direct connections failed; the first: %v", directFailed, n, err)
			}
			vipRate, directRate := float64(n)/took.Seconds(), float64(n)/directTook.Seconds()
			t.Logf("%d connections each: %.0f/s through the VIP, %.0f/s direct (%.2fx); the backend held %d NAT ports in TIME_WAIT after the VIP run",
				n, vipRate, directRate, vipRate/directRate, tw)
		})
	}
}
