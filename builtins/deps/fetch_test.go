// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestFetchCanonicalSetIntoCache(t *testing.T) {
	u := newFakeUpstream(t)
	cacheRoot := t.TempDir()
	opts := FetchOptions{Arch: []string{"arm64"}, CacheDir: cacheRoot, Resolver: u.resolver(), Client: u.Server.Client()}
	res, err := Fetch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range res.Files {
		keys = append(keys, f.Key)
		b, err := os.ReadFile(f.Cache)
		if err != nil || int64(len(b)) != f.Size || f.Arch != "arm64" {
			t.Fatalf("%+v: %v", f, err)
		}
		if !strings.HasPrefix(f.Cache, filepath.Join(cacheRoot, "dependencies", f.Key)+string(os.PathSeparator)) {
			t.Fatalf("cache path %s", f.Cache)
		}
	}
	if got := strings.Join(keys, ","); got != "containerd,gvisor,cni-plugins,kubelet,crictl,coredns,podmin-agent" {
		t.Fatalf("fetched %s", got)
	}
	// A second fetch reuses the verified cache: no downloads.
	opts.Resolver = u.resolver()
	if _, err := Fetch(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	downloads := 0
	for p, n := range u.RequestCounts() {
		if !strings.HasPrefix(p, "/api/") && !strings.HasSuffix(p, ".sha512") && !strings.HasSuffix(p, ".sha256") &&
			!strings.HasSuffix(p, ".sha256sum") && !strings.HasSuffix(p, "SHA512SUMS") {
			downloads += n
		}
	}
	if downloads != 7 {
		t.Fatalf("%d file downloads after two fetches, want 7 (the second one reuses the cache)", downloads)
	}
	if _, err := Fetch(context.Background(), FetchOptions{Arch: []string{"riscv64"}, CacheDir: cacheRoot}); err == nil ||
		!strings.Contains(err.Error(), `unknown architecture "riscv64"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestFetchAgentSourceCrossCompiles(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain:", err)
	}
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "cmd", "podmin-agent"), 0o755)
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/checkout\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(src, "cmd", "podmin-agent", "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	u := newFakeUpstream(t)
	// Without the compiled eBPF program the agent would build and ship
	// without its dataplane: refused before anything is built.
	_, err := Fetch(context.Background(), FetchOptions{Arch: []string{"arm64"}, CacheDir: t.TempDir(),
		Resolver: u.resolver(), Client: u.Server.Client(), AgentSource: src})
	if !errors.Is(err, ErrNoDataplane) || !strings.Contains(err.Error(), `has no bpf/obj/vip_bpfel.o: run "make bpf" there`) {
		t.Fatalf("a checkout without the eBPF object: %v", err)
	}
	os.MkdirAll(filepath.Join(src, "bpf", "obj"), 0o755)
	os.WriteFile(filepath.Join(src, "bpf", "obj", "vip_bpfel.o"), []byte("\x7fELF"), 0o644)
	res, err := Fetch(context.Background(), FetchOptions{Arch: []string{"arm64"}, CacheDir: t.TempDir(),
		Resolver: u.resolver(), Client: u.Server.Client(), AgentSource: src})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Files[len(res.Files)-1]
	if last.Key != "podmin-agent" || !strings.HasPrefix(last.Version, "0.0.0-dev.") ||
		last.Object != "dependencies/podmin-agent/podmin-agent-v"+last.Version+"-linux-arm64" {
		t.Fatalf("agent %+v", last)
	}
	b, err := os.ReadFile(last.Cache)
	// An ELF for aarch64: e_machine 183 at offset 18.
	if err != nil || string(b[:4]) != "\x7fELF" || b[18] != 183 {
		t.Fatalf("not an arm64 ELF: %v", err)
	}
	// Built as the release build is: static, stripped, without gRPC tracing.
	bi, err := buildinfo.ReadFile(last.Cache)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "-tags": "grpcnotrace"} {
		if settings[k] != v {
			t.Errorf("agent built with %s=%q, want %q (all: %v)", k, settings[k], v, settings)
		}
	}
	// -trimpath keeps -ldflags out of the build information: read the ELF.
	ef, err := elf.Open(last.Cache)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, name := range []string{".symtab", ".debug_info", ".interp"} {
		if ef.Section(name) != nil {
			t.Errorf("agent has a %s section: not static and stripped", name)
		}
	}
	if _, ok := (&Cache{}).Check(File{}); ok {
		t.Fatal("empty file checked valid")
	}
}

func TestFetchResolveOnlyDownloadsNothing(t *testing.T) {
	u := newFakeUpstream(t)
	dir := t.TempDir()
	res, err := Fetch(context.Background(), FetchOptions{Arch: []string{"amd64"}, CacheDir: dir, Resolver: u.resolver(),
		Client: refusingClient(), ResolveOnly: true, AgentSource: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 6 || res.Files[5].Key != "coredns" {
		t.Fatalf("files %+v: the agent from a source is neither resolved nor built in a dry run", res.Files)
	}
	if _, err := os.Stat(filepath.Join(dir, "dependencies")); !os.IsNotExist(err) {
		t.Fatalf("a dry run wrote the cache: %v", err)
	}
}
