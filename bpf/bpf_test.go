// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// TestVerifier loads every program and map of the committed object into
// this kernel, in both checksum modes (the verifier drops the code of the
// other), so the verifier has accepted exactly what ships.
func TestVerifier(t *testing.T) {
	requireBuilt(t)
	if os.Geteuid() != 0 {
		t.Skip("loading eBPF programs needs root (CAP_BPF and CAP_NET_ADMIN); run the tests as root to verify the committed object")
	}
	supported, err := CsumIPv6Supported()
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []bool{false, supported} {
		objs, err := Load(LoadOptions{Limits: DefaultLimits, CsumIPv6: flag})
		if err != nil {
			var ve *ebpf.VerifierError
			if errors.As(err, &ve) {
				t.Fatalf("verifier rejected the program (BPF_F_IPV6 %v):\n%+v", flag, ve)
			}
			t.Fatalf("load: %v", err)
		}
		if objs.PodminVip.Type() != ebpf.SchedCLS {
			t.Errorf("program type = %v, want SchedCLS", objs.PodminVip.Type())
		}
		objs.Close()
	}
}

// TestMapSizes pins the object's map sizes to the spec's bounds, which
// Load lowers to the configured limits.
func TestMapSizes(t *testing.T) {
	requireBuilt(t)
	spec, err := LoadVip()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{
		VipMapServices:     MaxLimits.Services,
		VipMapBackends:     MaxLimits.Backends,
		VipMapVips:         MaxLimits.Services,
		VipMapForwardFlows: MaxLimits.Flows,
		VipMapReverseFlows: MaxLimits.Flows,
		VipMapExhausted:    NATExhaustedEntries,
		VipMapStats:        StatCount,
		VipMapConfig:       1,
	}
	for name, n := range want {
		m := spec.Maps[name]
		if m == nil {
			t.Errorf("map %s is missing", name)
			continue
		}
		if m.MaxEntries != n {
			t.Errorf("map %s has %d entries, want %d", name, m.MaxEntries, n)
		}
	}
	for _, name := range []string{VipMapForwardFlows, VipMapReverseFlows, VipMapExhausted} {
		if got := spec.Maps[name].Type; got != ebpf.LRUHash {
			t.Errorf("map %s is %v, want an LRU hash", name, got)
		}
	}
	if len(spec.Maps) != len(want)+1 { // and .rodata
		t.Errorf("object has %d maps, want %d and .rodata", len(spec.Maps), len(want))
	}
}

// TestGeneratedUpToDate rebuilds the object and bindings from c/ with
// clang and requires them to equal the committed files byte for byte.
func TestGeneratedUpToDate(t *testing.T) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		t.Skip("clang is not installed, so the committed eBPF object cannot be rebuilt and compared: apt-get install -y clang llvm libbpf-dev linux-libc-dev")
	}
	if _, err := os.Stat("/usr/include/bpf/bpf_helpers.h"); err != nil {
		t.Skip("libbpf's headers are not installed, so the committed eBPF object cannot be rebuilt and compared: apt-get install -y libbpf-dev linux-libc-dev")
	}
	if testing.Short() {
		t.Skip("rebuilding the eBPF object runs clang and bpf2go; skipped in -short mode")
	}
	out, err := exec.Command(clang, "--version").Output()
	if err != nil {
		t.Fatalf("clang --version: %v", err)
	}
	want, err := os.ReadFile(filepath.Join("c", "clang-major"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`version (\d+)\.`).FindSubmatch(out)
	if m == nil || string(m[1]) != strings.TrimSpace(string(want)) {
		t.Skipf("the committed object was built with clang %s and this is %q; objects differ between clang versions, so they are compared only with the same major version",
			strings.TrimSpace(string(want)), strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
	}

	dir := t.TempDir()
	cmd := exec.Command("./generate.sh", dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, b)
	}
	if fi, err := os.Stat(filepath.Join(dir, "obj", "vip_bpfel.o")); err != nil || fi.Size() == 0 {
		t.Fatalf("generate.sh built no object into obj/: %v", err)
	}
	for _, f := range []string{"vip_bpfel.go"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, committed) {
			t.Errorf("%s is out of date with c/: run \"make generate\" and commit the result", f)
		}
	}
}

// requireBuilt skips a test that needs the compiled program in a build
// made without it (no clang); make test builds it first.
func requireBuilt(tb testing.TB) {
	tb.Helper()
	if err := Built(); err != nil {
		tb.Skip(err.Error())
	}
}

// TestLimits: Load sizes the maps to the limits, refuses limits outside
// the spec's bounds, and the memory formula predicts what the kernel
// accounts for the maps.
func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{Limits{Services: 0, Backends: 1, Flows: 1}, "the dataplane's limit of Service keys is 0: use 1 through 65536"},
		{Limits{Services: 1, Backends: 65537, Flows: 1}, "the dataplane's limit of backend entries is 65537: use 1 through 65536"},
		{Limits{Services: 1, Backends: 1, Flows: 262145}, "the dataplane's limit of flows is 262145: use 1 through 262144"},
	} {
		if err := tc.l.Check(); err == nil || err.Error() != tc.want {
			t.Errorf("Check(%+v) = %v, want %q", tc.l, err, tc.want)
		}
	}
	if err := MaxLimits.Check(); err != nil {
		t.Errorf("the spec's bounds: %v", err)
	}

	requireBuilt(t)
	requireRoot(t)
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []Limits{DefaultLimits, {Services: 100, Backends: 3000, Flows: 70000}} {
		objs, err := Load(LoadOptions{Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		for m, n := range map[*ebpf.Map]uint32{objs.Services: l.Services, objs.Vips: l.Services, objs.Backends: l.Backends, objs.ForwardFlows: l.Flows, objs.ReverseFlows: l.Flows} {
			if m.MaxEntries() != n {
				t.Errorf("%v has %d entries, want %d", m, m.MaxEntries(), n)
			}
		}
		got, err := LockedMemory(objs)
		objs.Close()
		if err != nil {
			t.Fatal(err)
		}
		want, err := Memory(l, cpus)
		if err != nil {
			t.Fatal(err)
		}
		if diff := float64(got) - float64(want); diff > 0.02*float64(want) || diff < -0.02*float64(want) {
			t.Errorf("limits %+v: the kernel accounts %d bytes, the formula says %d", l, got, want)
		}
		t.Logf("limits %+v with %d CPUs: %d bytes locked (%.1f MiB)", l, cpus, got, float64(got)/(1<<20))
	}
}
