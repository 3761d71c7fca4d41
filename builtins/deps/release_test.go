// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// releaseVersion is the version the test's release is built as.
const releaseVersion = "0.0.1"

// buildRelease runs make release's script for this machine's architecture
// into <mirror>/podmin/ and returns the mirror directory.
func buildRelease(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, "bpf", "obj", "vip_bpfel.o")); err != nil || fi.Size() == 0 {
		t.Skip("bpf/obj/vip_bpfel.o is not built (make bpf needs clang): a release refuses to ship an agent without its eBPF dataplane")
	}
	mirror := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "release.sh"), releaseVersion, filepath.Join(mirror, "podmin"), "test", "2026-01-01T00:00:00Z")
	cmd.Env = append(os.Environ(), "RELEASE_ARCHS="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, out)
	}
	return mirror
}

// make release's output, served from a directory and from a URL, is what
// setup's resolver fetches the agent from: resolved by the SHA512SUMS beside
// it, downloaded and verified, and the bytes are the release's own, the
// eBPF object inside. A tampered agent is refused and leaves nothing in the
// cache.
func TestReleaseIsFetchedAndVerified(t *testing.T) {
	mirrorDir := buildRelease(t)
	ctx := context.Background()
	arch := Arch(runtime.GOARCH)
	dep, ok := Lookup("podmin-agent")
	if !ok {
		t.Fatal("no podmin-agent dependency")
	}
	relDir := filepath.Join(mirrorDir, "podmin", "v"+releaseVersion)
	agentPath := filepath.Join(relDir, "podmin-agent-linux-"+runtime.GOARCH)
	agent, err := os.ReadFile(agentPath)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := os.ReadFile(filepath.Join("..", "..", "bpf", "obj", "vip_bpfel.o"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(agent, obj) {
		t.Fatal("the released agent does not embed bpf/obj/vip_bpfel.o")
	}
	// The SHA-256 list, for people checking a download by hand, agrees.
	sums, err := os.ReadFile(filepath.Join(relDir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(agent)
	if line := fmt.Sprintf("%s  podmin-agent-linux-%s\n", hex.EncodeToString(sum[:]), runtime.GOARCH); !strings.Contains(string(sums), line) {
		t.Fatalf("SHA256SUMS lacks %q:\n%s", line, sums)
	}

	fileMirror, err := ParseMirror(mirrorDir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(mirrorDir)))
	defer srv.Close()
	for _, mirror := range []string{fileMirror, srv.URL} {
		t.Run(strings.SplitN(mirror, ":", 2)[0], func(t *testing.T) {
			r := &Resolver{Mirror: mirror, AgentVersion: "v" + releaseVersion, Client: srv.Client()}
			files, err := r.Resolve(ctx, dep, []Arch{arch})
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("dependencies/podmin-agent/podmin-agent-v%s-linux-%s", releaseVersion, arch)
			if len(files) != 1 || files[0].Path != want || !strings.HasPrefix(files[0].Digest, "sha512:") {
				t.Fatalf("resolved %+v, want %s with its SHA-512", files, want)
			}
			cache := &Cache{Dir: t.TempDir(), Client: srv.Client()}
			got, err := cache.EnsureAll(ctx, files)
			if err != nil {
				t.Fatal(err)
			}
			cached, err := os.ReadFile(cache.Path(got[0]))
			if err != nil || !bytes.Equal(cached, agent) || got[0].Size != int64(len(agent)) {
				t.Fatalf("cached agent differs from the release's (%v, %d bytes)", err, got[0].Size)
			}
		})
	}

	// Tampered after the checksums were made: refused, nothing cached.
	if err := os.WriteFile(agentPath, append(agent, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Mirror: fileMirror, AgentVersion: releaseVersion}
	files, err := r.Resolve(ctx, dep, []Arch{arch})
	if err != nil {
		t.Fatal(err)
	}
	cache := &Cache{Dir: t.TempDir()}
	if _, err := cache.EnsureAll(ctx, files); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("a tampered agent: %v, want %v", err, ErrDigestMismatch)
	}
	if _, err := os.Stat(cache.Path(files[0])); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a tampered agent was cached: %v", err)
	}
	// A release without its checksums is refused before any download.
	if err := os.Remove(filepath.Join(relDir, "SHA512SUMS")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, dep, []Arch{arch}); err == nil || !strings.Contains(err.Error(), "SHA512SUMS: 404") {
		t.Fatalf("a release without SHA512SUMS: %v", err)
	}
}

// The mirror setting takes a directory or an http(s) URL and refuses
// anything else, saying what to set.
func TestParseMirror(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ in, want, err string }{
		{"", "", ""},
		{dir, "file://" + filepath.ToSlash(dir), ""},
		{"file://" + dir, "file://" + filepath.ToSlash(dir), ""},
		{"https://mirror.example/podmin/", "https://mirror.example/podmin", ""},
		{filepath.Join(dir, "missing"), "", "is neither an http(s) URL nor a directory"},
		{"ftp://mirror.example", "", "is neither an http(s) URL nor a directory"},
	} {
		got, err := ParseMirror(tc.in)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseMirror(%q) = %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}
