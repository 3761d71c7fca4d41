// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// bpffs mounts a bpf filesystem of its own on a temporary directory for
// the test.
func bpffs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Skipf("cannot mount a bpf filesystem (needs root and a kernel with bpffs): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestGeneration: the generation changes with the limits and the load
// options, and only with them.
func TestGeneration(t *testing.T) {
	requireBuilt(t)
	base := LoadOptions{Limits: DefaultLimits}
	g, err := Generation(base)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Generation(base); again != g {
		t.Fatalf("generation %s then %s for the same options", g, again)
	}
	for _, o := range []LoadOptions{
		{Limits: Limits{Services: DefaultLimits.Services + 1, Backends: DefaultLimits.Backends, Flows: DefaultLimits.Flows}},
		{Limits: Limits{Services: DefaultLimits.Services, Backends: DefaultLimits.Backends + 1, Flows: DefaultLimits.Flows}},
		{Limits: Limits{Services: DefaultLimits.Services, Backends: DefaultLimits.Backends, Flows: DefaultLimits.Flows + 1}},
		{Limits: DefaultLimits, CsumIPv6: true},
	} {
		if other, _ := Generation(o); other == g {
			t.Errorf("options %+v share the generation %s of %+v", o, g, base)
		}
	}
}

// TestLoadPinned: pinned objects are opened again only with the options
// that created them, only when complete, and they are the same kernel
// objects.
func TestLoadPinned(t *testing.T) {
	requireBuilt(t)
	requireRoot(t)
	root := bpffs(t)
	o := LoadOptions{Limits: DefaultLimits}
	objs, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	dir := filepath.Join(root, "gen")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Pin(objs, dir); err != nil {
		t.Fatal(err)
	}
	if err := objs.Config.Put(uint32(0), VipConfig{Lease: 42}); err != nil {
		t.Fatal(err)
	}

	again, err := LoadPinned(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var cfg VipConfig
	if err := again.Config.Lookup(uint32(0), &cfg); err != nil || cfg.Lease != 42 {
		t.Fatalf("the pinned config map reads %+v, %v: want the loaded map's lease 42", cfg, err)
	}
	id := func(p *ebpf.Program) ebpf.ProgramID {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		v, _ := info.ID()
		return v
	}
	if id(again.PodminVip) != id(objs.PodminVip) {
		t.Error("the pinned program is not the loaded one")
	}
	again.Close()

	other := LoadOptions{Limits: Limits{Services: 10, Backends: 10, Flows: 10}}
	if _, err := LoadPinned(dir, other); !errors.Is(err, ebpf.ErrMapIncompatible) {
		t.Errorf("pins loaded with other limits: %v, want them refused as incompatible", err)
	}
	if err := os.Remove(filepath.Join(dir, VipMapStats)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPinned(dir, o); err == nil {
		t.Error("an incomplete pin directory was loaded")
	}
}
