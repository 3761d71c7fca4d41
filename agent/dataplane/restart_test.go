// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"podmin.dev/podmin/bpf"
)

// streamInterval paces the new connections of the restart tests.
const streamInterval = 5 * time.Millisecond

// TestAgentRestartKeepsServiceTraffic measures Service traffic across an
// agent's death: new connections go through the VIP one after another
// while the process owning the dataplane is SIGKILLed, connections keep
// being made with no owner at all, and a new owner starts as the agent
// does (New, Renew, Apply of the same Services). Pinned, no connection
// fails and the new owner adopts the maps (re-applying the same Services
// writes nothing) and a connection opened before the death keeps its
// backend; unpinned, as before, connections fail until the new owner
// attaches.
func TestAgentRestartKeepsServiceTraffic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pinned bool
		tag    string
		// orphaned is how many connections are made with no owner: an
		// unpinned node fails each only after a second.
		orphaned int
	}{{"pinned", true, "K", 40}, {"unpinned", false, "U", 16}} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTopology(t, tc.tag)
			tp.serve(t, tp.b1, "b1")
			tp.serve(t, tp.b2, "b2")
			// Without a program the node answers every SYN to the VIP at
			// once with "no route", which fails the connection, rather
			// than leaving it to time out.
			run(t, "ip", "netns", "exec", tp.node, "sysctl", "-qw", "net.ipv6.icmp.ratelimit=0")
			pinPath := ""
			if tc.pinned {
				pinPath = bpffs(t)
			}
			spec := ownerSpec{NetNS: tp.nsPath(tp.node), PinPath: pinPath, Backends: []netip.Addr{backend1, backend2}}
			first := startOwner(t, spec)

			held, err := tp.dial(t, vipTCP, 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			before, err := ask(held)
			if err != nil {
				t.Fatal(err)
			}

			s := tp.startStream(t, vipTCP, streamInterval)
			s.waitAttempts(t, 20)
			first.kill(t)
			killedAt, _ := s.counts()
			// Connections made while no process owns the dataplane.
			s.waitAttempts(t, tc.orphaned)
			orphaned, orphanFailures := s.counts()

			dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node), PinPath: pinPath})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = dp.Stop() })
			until, inherited := dp.Inherited()
			if err := dp.PinProblem(); tc.pinned && err != nil {
				t.Fatalf("pinned on a bpf filesystem: %v", err)
			}
			renew(t, dp)
			w := dp.writes
			f := &fixture{tp, dp}
			f.apply(t, service(backend1, backend2))
			rewrites := dp.writes - w
			s.waitAttempts(t, 40)
			s.halt()
			attempts, failures := s.counts()
			t.Logf("%s: %d new connections through the VIP, %d failed (%d made without an owner, %d of them failed), longest gap between successful connections %v",
				tc.name, attempts, failures, orphaned-killedAt, orphanFailures, s.longestGap.Round(time.Microsecond))

			if !tc.pinned {
				if orphanFailures == 0 {
					t.Errorf("unpinned: none of the %d connections made without an owner failed: the program outlived its process", orphaned-killedAt)
				}
				if inherited {
					t.Error("an unpinned dataplane reports an inherited one")
				}
				return
			}
			if failures != 0 {
				t.Errorf("%d of %d new connections failed across the restart (first: %v), want none", failures, attempts, s.firstErr)
			}
			if !inherited || time.Until(until) < 30*time.Minute {
				t.Errorf("Inherited() = %v, %v: want the adopted dataplane and the hour-long lease its owner renewed", until, inherited)
			}
			if rewrites != 0 {
				t.Errorf("re-applying the adopted Services made %d map writes, want 0: the adopted state was not reconstructed", rewrites)
			}
			after, err := ask(held)
			if err != nil || after != before {
				t.Errorf("the connection opened before the restart answered %v, %v: want %v, its backend kept", after, err, before)
			}
			for _, ifc := range []string{"hb1", "hb2", "hc", "lo"} {
				if n := f.attachedPrograms(t, ifc); n != 1 {
					t.Errorf("%s has %d TCX programs after the adoption, want 1", ifc, n)
				}
			}
		})
	}
}

// TestUpgradeTakesOverWithoutGap: a new agent whose program is another
// generation (here: other map limits) leaves the old program forwarding
// on its own maps until its first Apply, then swaps its program into the
// old links in place: no new connection fails, every interface ends with
// exactly the new program, and the old generation's pins are gone.
func TestUpgradeTakesOverWithoutGap(t *testing.T) {
	tp := newTopology(t, "G")
	tp.serve(t, tp.b1, "b1")
	tp.serve(t, tp.b2, "b2")
	pinPath := bpffs(t)
	old := startOwner(t, ownerSpec{NetNS: tp.nsPath(tp.node), PinPath: pinPath, Backends: []netip.Addr{backend1, backend2}})
	oldGens, err := filepath.Glob(filepath.Join(pinPath, "[0-9a-f]*"))
	if err != nil || len(oldGens) != 1 {
		t.Fatalf("the old owner pinned generations %v (%v), want one", oldGens, err)
	}

	s := tp.startStream(t, vipTCP, streamInterval)
	s.waitAttempts(t, 20)
	old.kill(t)
	limits := bpf.Limits{Services: 512, Backends: 4096, Flows: 8192}
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node), PinPath: pinPath, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Stop() })
	if err := dp.PinProblem(); err != nil {
		t.Fatalf("pinned on a bpf filesystem: %v", err)
	}
	until, inherited := dp.Inherited()
	if !inherited || !until.IsZero() {
		t.Errorf("Inherited() = %v, %v: want the other generation's dataplane, its lease unknown", until, inherited)
	}
	// The old program still forwards while the new one waits for its
	// first Apply.
	s.waitAttempts(t, 40)
	renew(t, dp)
	f := &fixture{tp, dp}
	swapFrom := time.Now()
	f.apply(t, service(backend1, backend2))
	swapTo := time.Now()
	s.waitAttempts(t, 40)
	s.halt()
	attempts, failures := s.counts()
	// A connection under way while the program is swapped loses its NAT
	// state (the new generation's maps start without the old flows), as
	// the README says; every other connection must succeed.
	outside := s.failedOutside(swapFrom, swapTo)
	t.Logf("upgrade: %d new connections through the VIP, %d failed (%d of them under way during the swap), longest gap between successful connections %v",
		attempts, failures, failures-outside, s.longestGap.Round(time.Microsecond))
	if outside != 0 {
		t.Errorf("%d of %d new connections failed across the upgrade outside the swap itself (first: %v), want none", outside, attempts, s.firstErr)
	}

	id, err := programID(dp.objs.PodminVip)
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range []string{"hb1", "hb2", "hc", "lo"} {
		f.in(t, f.node, func() error {
			idx, err := netInterfaceByName(ifc)
			if err != nil {
				return err
			}
			res, err := link.QueryPrograms(link.QueryOptions{Target: idx, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			if len(res.Programs) != 1 || res.Programs[0].ID != id {
				t.Errorf("%s runs %+v, want only the new program %d", ifc, res.Programs, id)
			}
			return nil
		})
	}
	if _, err := os.Stat(oldGens[0]); !os.IsNotExist(err) {
		t.Errorf("the old generation's pins %s are still there (%v)", oldGens[0], err)
	}
	links, err := os.ReadDir(filepath.Join(pinPath, linksDir))
	if err != nil || len(links) != 4 {
		t.Errorf("%d pinned links (%v), want the 4 attachments", len(links), err)
	}
}
