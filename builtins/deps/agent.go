// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
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

// BuildAgent cross-compiles podmin-agent for arch from the Podmin checkout
// at source (--agent-source) into the cache. Its version is a development
// version carrying the binary's digest, so every distinct build gets its
// own object path and never replaces a published agent.
func BuildAgent(ctx context.Context, source string, arch Arch, cache *Cache) (File, error) {
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
