// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"podmin.dev/podmin/internal/paths"
)

// AgentPackage is the agent's main package inside a Podmin checkout.
const AgentPackage = "./cmd/podmin-agent"

// AgentBuildArgs are the go build arguments of an agent built from a
// checkout: the release build's (the Makefile's build target), static and
// stripped, without gRPC's tracing pages, whose html/template would keep
// every exported method of every linked type in the binary every node
// downloads.
var AgentBuildArgs = []string{"-trimpath", "-tags", "grpcnotrace", "-ldflags", "-s -w"}

// AgentDataplaneObject is the compiled eBPF program inside a checkout,
// which the agent embeds (bpf/object.go): build output of make bpf, so a
// checkout where clang never ran lacks it.
const AgentDataplaneObject = "bpf/obj/vip_bpfel.o"

// ErrNoDataplane reports a checkout whose agent would have no eBPF
// dataplane: it would build, and every node would run without Service
// VIPs.
var ErrNoDataplane = errors.New("the agent would have no eBPF dataplane")

// CheckAgentSource refuses a checkout without the compiled eBPF program,
// which an agent built from it would silently lack.
func CheckAgentSource(source string) error {
	p := filepath.Join(source, filepath.FromSlash(AgentDataplaneObject))
	if st, err := os.Stat(p); err != nil || st.Size() == 0 {
		return fmt.Errorf("%w: %s has no %s: run \"make bpf\" there (it needs clang: apt-get install -y clang llvm libbpf-dev linux-libc-dev), then run this again", ErrNoDataplane, source, AgentDataplaneObject)
	}
	return nil
}

// BuildAgent cross-compiles podmin-agent for arch from the Podmin checkout
// at source (--agent-source) into the cache; a checkout without the
// compiled eBPF program is refused (CheckAgentSource). Its version is a development
// version carrying the binary's digest, so every distinct build gets its
// own object path and never replaces a published agent.
func BuildAgent(ctx context.Context, source string, arch Arch, cache *Cache) (File, error) {
	if err := CheckAgentSource(source); err != nil {
		return File{}, err
	}
	dir := filepath.Join(cache.Dir, "podmin-agent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return File{}, err
	}
	tmp, err := paths.CreateTemp(dir)
	if err != nil {
		return File{}, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := append(append([]string{"build"}, AgentBuildArgs...), "-o", tmp.Name(), AgentPackage)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = source
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+string(arch), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return File{}, fmt.Errorf("build podmin-agent for %s from %s: %w\n%s", arch, source, err, out)
	}
	f, err := os.Open(tmp.Name())
	if err != nil {
		return File{}, err
	}
	h := sha512.New()
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return File{}, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	version := "0.0.0-dev." + sum[:12]
	file := File{Key: "podmin-agent", Arch: arch, Canonical: "podmin-agent", Version: version,
		URL:    "file://" + filepath.ToSlash(source),
		Path:   fmt.Sprintf("dependencies/podmin-agent/podmin-agent-v%s-linux-%s", version, arch),
		Digest: "sha512:" + sum, Size: n}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return File{}, err
	}
	if err := os.Rename(tmp.Name(), cache.Path(file)); err != nil {
		return File{}, err
	}
	return file, paths.SyncDir(dir)
}
