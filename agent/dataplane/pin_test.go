// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/bpf"
)

// newPinnedFixture is newFixture with the dataplane pinned on a bpf
// filesystem of the test's own.
func newPinnedFixture(t *testing.T, tag string) (*fixture, string) {
	t.Helper()
	tp := newTopology(t, tag)
	tp.serve(t, tp.b1, "b1")
	tp.serve(t, tp.b2, "b2")
	pinPath := bpffs(t)
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node), PinPath: pinPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := dp.PinProblem(); err != nil {
		t.Fatalf("pinned on a bpf filesystem: %v", err)
	}
	t.Cleanup(func() { _ = dp.Stop() })
	renew(t, dp)
	return &fixture{tp, dp}, pinPath
}

// dialOK opens a connection through the VIP and asks one line.
func (f *fixture) dialOK(t *testing.T) reply {
	t.Helper()
	c, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := ask(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLeaseRefusesNewFlows: past the lease the program gives no new flow
// a backend, counting each refusal, while an open connection keeps its
// backend; a renewed lease opens the Service again.
func TestLeaseRefusesNewFlows(t *testing.T) {
	f := newFixture(t, "L")
	f.apply(t, service(backend1, backend2))
	held, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	first, err := ask(held)
	if err != nil {
		t.Fatal(err)
	}

	if err := f.dp.Renew(time.Now().Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	before := f.stats(t).Drops[DropLeaseExpired]
	if c, err := f.dial(t, vipTCP, 500*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a new connection got a backend past the lease")
	}
	if after := f.stats(t).Drops[DropLeaseExpired]; after <= before {
		t.Errorf("lease_expired drops stayed at %d", after)
	}
	if r, err := ask(held); err != nil || r != first {
		t.Fatalf("the open connection past the lease answered %v, %v: want %v", r, err, first)
	}

	renew(t, f.dp)
	f.dialOK(t)
}

// TestStopLeavesPinnedDataplane is SIGTERM: Stop with Services leaves
// the program attached and forwarding under its lease for the next
// agent; past the lease (here written as the clock would reach it) it
// refuses new flows with no agent, open flows kept.
func TestStopLeavesPinnedDataplane(t *testing.T) {
	f, pinPath := newPinnedFixture(t, "T")
	f.apply(t, service(backend1, backend2))
	held, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	first, err := ask(held)
	if err != nil {
		t.Fatal(err)
	}
	gen := f.dp.pin.genDir()
	if err := f.dp.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, ifc := range []string{"hb1", "hb2", "hc", "lo"} {
		if n := f.attachedPrograms(t, ifc); n != 1 {
			t.Errorf("%s has %d TCX programs after Stop, want 1", ifc, n)
		}
	}
	f.dialOK(t)

	// The lease runs out with no agent to renew it.
	objs, err := bpf.LoadPinned(gen, bpf.LoadOptions{Limits: bpf.DefaultLimits, CsumIPv6: csumFlag(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	var cfg bpf.VipConfig
	if err := objs.Config.Lookup(uint32(0), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Lease = uint64(monotonicNs()) - 1
	if err := objs.Config.Put(uint32(0), cfg); err != nil {
		t.Fatal(err)
	}
	if c, err := f.dial(t, vipTCP, 500*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a new connection got a backend from a dataplane whose lease ran out")
	}
	if r, err := ask(held); err != nil || r != first {
		t.Fatalf("the open connection answered %v, %v after the lease ran out: want %v", r, err, first)
	}

	// The explicit way to take it off the node.
	if removed, err := RemovePinned(pinPath); err != nil || !removed {
		t.Fatalf("RemovePinned = %v, %v: want the dataplane removed", removed, err)
	}
	if removed, err := RemovePinned(pinPath); err != nil || removed {
		t.Fatalf("RemovePinned again = %v, %v: want nothing to remove", removed, err)
	}
	// The kernel releases a link whose last pin went in the background.
	waitFor(t, "every program detached after RemovePinned", func() bool {
		n := 0
		for _, ifc := range []string{"hb1", "hb2", "hc", "lo"} {
			n += f.attachedPrograms(t, ifc)
		}
		return n == 0
	})
	if _, err := os.Stat(pinPath); !os.IsNotExist(err) {
		t.Errorf("%s is still there after RemovePinned (%v)", pinPath, err)
	}
}

// TestStopWithoutServicesRemovesPins: with no Services there is nothing
// to keep, so Stop removes the generation's pins; Remove takes a pinned
// dataplane with Services off the node.
func TestStopWithoutServicesRemovesPins(t *testing.T) {
	f, pinPath := newPinnedFixture(t, "N")
	f.apply(t, service(backend1))
	f.apply(t)
	gen := f.dp.pin.genDir()
	if err := f.dp.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gen); !os.IsNotExist(err) {
		t.Errorf("the pins %s outlived a Stop without Services (%v)", gen, err)
	}

	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: f.nsPath(f.node), PinPath: pinPath})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dp.Inherited(); ok {
		t.Error("a dataplane stopped without Services left one to inherit")
	}
	renew(t, dp)
	f.dp = dp
	f.apply(t, service(backend1))
	f.dialOK(t)
	if err := dp.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, ifc := range []string{"hb1", "hc", "lo"} {
		if n := f.attachedPrograms(t, ifc); n != 0 {
			t.Errorf("%s has %d TCX programs after Remove, want 0", ifc, n)
		}
	}
	if _, err := os.Stat(pinPath); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Remove (%v)", pinPath, err)
	}
}

// TestUnpinnedWithoutBPFFS: a pin path whose parent is no bpf filesystem
// runs the dataplane as before, unpinned, and PinProblem says what to
// mount; nothing is created there.
func TestUnpinnedWithoutBPFFS(t *testing.T) {
	tp := newTopology(t, "F")
	tp.serve(t, tp.b1, "b1")
	root := t.TempDir()
	pinPath := filepath.Join(root, "sys/fs/bpf/podmin")
	if err := os.MkdirAll(filepath.Dir(pinPath), 0o755); err != nil {
		t.Fatal(err)
	}
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node), PinPath: pinPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Stop() })
	if err := dp.PinProblem(); err == nil || !strings.Contains(err.Error(), "mount -t bpf bpf "+filepath.Dir(pinPath)) {
		t.Errorf("PinProblem() = %v, want it to say to mount a bpf filesystem at %s", err, filepath.Dir(pinPath))
	}
	renew(t, dp)
	f := &fixture{tp, dp}
	f.apply(t, service(backend1))
	if r := f.dialOK(t); r.backend != "b1" {
		t.Errorf("reached %s, want b1", r.backend)
	}
	if _, err := os.Stat(pinPath); !os.IsNotExist(err) {
		t.Errorf("%s was created on a file system that is not bpffs (%v)", pinPath, err)
	}
	if err := dp.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := f.attachedPrograms(t, "hc"); n != 0 {
		t.Errorf("hc has %d TCX programs after an unpinned Stop, want 0", n)
	}
}

// csumFlag is the checksum mode New chose on this kernel.
func csumFlag(t *testing.T) bool {
	t.Helper()
	ok, err := bpf.CsumIPv6Supported()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
