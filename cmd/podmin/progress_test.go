// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/creack/pty"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/internal/oci"
)

// writeBigImage stores an image index of layers random layers of size
// bytes each in the CLI's local image store as repo:tag, without
// compressing anything, so a large push is quick to prepare.
func writeBigImage(t *testing.T, c *cli, repo, tag string, layers int, size int64) {
	t.Helper()
	store := oci.NewStore(filepath.Join(c.root, "cache", "podmin", "images"))
	dir, err := store.Dir(repo)
	if err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(mt types.MediaType, data []byte) v1.Descriptor {
		sum := sha256.Sum256(data)
		h := hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(blobs, h), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return v1.Descriptor{MediaType: mt, Size: int64(len(data)), Digest: v1.Hash{Algorithm: "sha256", Hex: h}}
	}
	rng := rand.NewChaCha8([32]byte{1})
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1}
	m.Config = put(types.OCIConfigJSON, []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}}`))
	for range layers {
		data := make([]byte, size)
		_, _ = rng.Read(data)
		m.Layers = append(m.Layers, put(types.OCIUncompressedLayer, data))
	}
	mb, _ := json.Marshal(m)
	md := put(types.OCIManifestSchema1, mb)
	md.Platform = &v1.Platform{OS: "linux", Architecture: "amd64"}
	ib, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{md}})
	top := put(types.OCIImageIndex, ib)
	if err := store.Tag(repo, top, tag); err != nil {
		t.Fatal(err)
	}
}

// TestPushProgress pushes 256 MiB twice: with standard error on a
// pseudo-terminal it draws bars (cursor movement, a filled bar, bytes of
// the total); with standard error on a pipe it writes plain lines and not
// one escape sequence. Standard output is the one reference line both times.
func TestPushProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 512 MiB")
	}
	c := newCLI(t)
	c.connectLocal()
	writeBigImage(t, c, "registry.podmin.internal/apps/big", "v1", 4, 64<<20)
	lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 140}); err != nil {
		t.Fatal(err)
	}
	term := &syncBuffer{more: make(chan struct{}, 1)}
	go func() { _, _ = io.Copy(term, ptmx) }()
	var stdout bytes.Buffer
	code := run(context.Background(), []string{"push", "big:v1"}, strings.NewReader(""), &stdout, tty, lookup)
	if code != 0 || stdout.String() != "registry.podmin.internal/apps/big:v1\n" {
		t.Fatalf("push on a terminal: exit %d, stdout %q", code, stdout.String())
	}
	// The last frame: the total bar, complete, with its byte counts.
	term.waitFor(t, "256.0 MiB / 256.0 MiB")
	term.mu.Lock()
	shown := term.buf.String()
	term.mu.Unlock()
	for _, want := range []string{"push registry.podmin.internal/apps/big:v1", "\x1b[", "[=====", "done"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the terminal shows no %q:\n%q", want, shown)
		}
	}
	// Frames drawn while the push was running, not only the last one.
	during := 0
	for _, m := range regexp.MustCompile(`big:v1 +\[[=> -]+\] +([0-9.]+ [a-zA-Z]+) / 256\.0 MiB`).FindAllStringSubmatch(shown, -1) {
		if m[1] != "256.0 MiB" {
			during++
		}
	}
	if during == 0 {
		t.Errorf("the terminal shows no frame of the push in progress:\n%q", shown)
	}
	if !regexp.MustCompile(`[0-9a-f]{12} +\[[- >]+\] +[0-9.]+ [a-zA-Z]+ / 64\.0 MiB`).MatchString(shown) {
		t.Errorf("the terminal shows no bar of a 64 MiB blob:\n%q", shown)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	piped := make(chan string)
	go func() { b, _ := io.ReadAll(r); piped <- string(b) }()
	stdout.Reset()
	code = run(context.Background(), []string{"push", "big:v1", "big2:v1"}, strings.NewReader(""), &stdout, w, lookup)
	w.Close()
	logged := <-piped
	if code != 0 || stdout.String() != "registry.podmin.internal/apps/big2:v1\n" {
		t.Fatalf("push into a pipe: exit %d, stdout %q", code, stdout.String())
	}
	if strings.Contains(logged, "\x1b") || strings.Contains(logged, "\r") {
		t.Errorf("a pipe received terminal control characters:\n%q", logged)
	}
	for _, want := range []string{
		"push registry.podmin.internal/apps/big2:v1: 256.0 MiB to transfer\n",
		"push registry.podmin.internal/apps/big2:v1: done, 256.0 MiB in ",
	} {
		if !strings.Contains(logged, want) {
			t.Errorf("the log has no %q:\n%s", want, logged)
		}
	}
}

// TestRecipePushShowsProgress runs a recipe's push: it reports into the
// same sink as the CLI's push, so its progress reaches standard error
// while the recipe's own print() output stays on standard output.
func TestRecipePushShowsProgress(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	writeBigImage(t, c, "registry.podmin.internal/apps/small", "v1", 2, 1<<20)
	recipe := c.script("push.star", "def main(ctx):\n    print(podmin.images.push(\"small:v1\").references[0])\n")
	out, errs, code := c.run("run", recipe)
	if code != 0 || out != "registry.podmin.internal/apps/small:v1\n" {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	for _, want := range []string{
		"push registry.podmin.internal/apps/small:v1: 2.0 MiB to transfer\n",
		"push registry.podmin.internal/apps/small:v1: done, 2.0 MiB in ",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr has no %q:\n%s", want, errs)
		}
	}
}
