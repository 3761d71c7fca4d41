// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/state"
)

// seedCloudflaredMirror publishes a small two-platform image in the
// local bucket's cloudflared mirror, tagged as the pinned image is, as an
// earlier install leaves the mirror, and makes c install that image in
// place of the pinned one: an install then reuses the mirror (its blobs
// all in place) without asking the upstream registry. The image is the
// same in every run, so outputs naming it are stable.
func seedCloudflaredMirror(t *testing.T, c *cli, bucket string) builtins.PinnedImage {
	t.Helper()
	ctx := context.Background()
	pin := builtins.Cloudflared()
	registry, repository, _ := strings.Cut(pin.Platform.Source, "/")
	layout, err := state.MirrorLayout(registry, repository)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		layer := static.NewLayer([]byte("cloudflared stand-in for "+arch), types.OCIUncompressedLayer)
		img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		cf.OS, cf.Architecture = "linux", arch
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	images := oci.NewStore(t.TempDir())
	top, err := images.Write(ctx, pin.Platform.Source, idx, pin.Tag)
	if err != nil {
		t.Fatal(err)
	}
	src, err := images.Source(pin.Platform.Source)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oci.Push(ctx, local.Open(bucket), src, top, layout, pin.Tag, oci.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	pin.Digest = top.Digest.String()
	adjust := c.adjust
	c.adjust = func(e *builtins.Env) {
		if adjust != nil {
			adjust(e)
		}
		e.CloudflaredImage = &pin
	}
	return pin
}

// installCLI is a connected local cluster holding the tunnel token and a
// mirror that already holds the image it installs, which it returns.
func installCLI(t *testing.T) (*cli, builtins.PinnedImage) {
	c := newCLI(t)
	bucket := c.connectLocal()
	token := writeFile(t, c.root, "token.txt", "tunnel token value")
	c.ok("secret", "create", "tunnel-token", "--for", "cloudflared", "-n", "platform-cloudflared", "--file", token)
	return c, seedCloudflaredMirror(t, c, bucket)
}

func TestInstallCloudflaredNeedsTheTokenFirst(t *testing.T) {
	c := secretCLI(t)
	before := c.snapshot()
	c.fails(1, `store the token with "podmin secret create tunnel-token --for cloudflared -n platform-cloudflared --provider local"`,
		"install", "cloudflared", "-g", "edge")
	c.unchanged(before)
}

func TestInstallCloudflaredReusesTheMirrorAndUninstalls(t *testing.T) {
	c, pin := installCLI(t)
	out := c.ok("install", "cloudflared", "-g", "edge")
	if !strings.Contains(out, "image "+pin.Reference()+" reused\n") || !strings.Contains(out, "edge/cloudflared created in bucket") {
		t.Fatalf("install output:\n%s", out)
	}
	if out := c.ok("install", "cloudflared", "-g", "edge"); !strings.Contains(out, "edge/cloudflared unchanged") {
		t.Fatalf("second install:\n%s", out)
	}
	if out := c.ok("list"); !strings.Contains(out, "cloudflared") {
		t.Fatalf("list does not show the install:\n%s", out)
	}
	before := c.snapshot()
	c.fails(4, "pass --yes (-y) to podmin uninstall cloudflared", "uninstall", "cloudflared", "-g", "edge")
	c.unchanged(before)
	if out := c.ok("uninstall", "cloudflared", "-g", "edge", "-y"); out != "edge/cloudflared deleted from the desired state; nodes remove its Pod when they next reconcile\n" {
		t.Fatalf("uninstall: %q", out)
	}
}

func TestUninstallCloudflaredNeedsConfirmation(t *testing.T) {
	c := secretCLI(t)
	before := c.snapshot()
	c.fails(4, "pass --yes (-y) to podmin uninstall cloudflared", "uninstall", "cloudflared", "-g", "edge")
	c.unchanged(before)
	if out := c.ok("uninstall", "cloudflared", "-g", "edge", "-y"); out != "cloudflared is not installed on edge: nothing was changed\n" {
		t.Fatalf("uninstall -y of nothing: %q", out)
	}
}

// exitRow is one row of TestExitCodeContract's table.
type exitRow = struct {
	cli  *cli
	code int
	want string
	args []string
}

// installExitRows are the exit-code rows of install, uninstall and their
// cloudflared subcommands. fresh has no context; noToken is connected
// without the tunnel token.
func installExitRows(t *testing.T, fresh, noToken *cli) []exitRow {
	c, _ := installCLI(t)
	// A deployment named cloudflared that the install did not create.
	manifest := writeFile(t, c.root, "ds.yaml", "")
	c.ok("init", "cloudflared", "-g", "shared", "--image", "hello:v1", "-f", manifest, "--force")
	c.ok("deploy", "cloudflared", "-g", "shared", "-f", manifest)
	return []exitRow{
		{noToken, exitOK, "", []string{"install"}},
		{noToken, exitOK, "", []string{"uninstall"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"install", "cloudflared", "-g", "Bad_Group"}},
		{fresh, exitUsage, `unknown secrets provider "vault"`, []string{"install", "cloudflared", "-g", "edge", "--provider", "vault"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"uninstall", "cloudflared", "-g", "Bad_Group", "-y"}},
		{fresh, exitUsage, `unknown command "edge" for "podmin uninstall cloudflared"`, []string{"uninstall", "cloudflared", "edge"}},
		{fresh, exitFailed, "needs a current context", []string{"install", "cloudflared", "-g", "edge"}},
		{noToken, exitFailed, `store the token with "podmin secret create tunnel-token --for cloudflared -n platform-cloudflared`, []string{"install", "cloudflared", "-g", "edge"}},
		{c, exitOK, "", []string{"install", "cloudflared", "-g", "edge"}},
		{c, exitRefused, "pass --yes (-y) to podmin uninstall cloudflared", []string{"uninstall", "cloudflared", "-g", "edge"}},
		{c, exitOK, "", []string{"uninstall", "cloudflared", "-g", "edge", "-y"}},
		{c, exitOK, "", []string{"uninstall", "cloudflared", "-g", "edge", "-y"}},
		{c, exitRefused, `deployment shared/cloudflared was not created by "podmin install cloudflared"`, []string{"install", "cloudflared", "-g", "shared"}},
		{c, exitRefused, `deployment shared/cloudflared was not created by "podmin install cloudflared"`, []string{"uninstall", "cloudflared", "-g", "shared", "-y"}},
	}
}

// goldenStep is one step of TestJSONGolden.
type goldenStep = struct {
	name string
	args []string
}

// installGoldenSteps prepares c's cluster (the tunnel token, a mirror
// that tags the pinned image) and returns the install and uninstall steps.
func installGoldenSteps(t *testing.T, c *cli, bucket string) []goldenStep {
	token := writeFile(t, c.root, "tunnel-token.txt", "golden tunnel token")
	c.ok("secret", "create", "tunnel-token", "--for", "cloudflared", "-n", "platform-cloudflared", "--file", token)
	seedCloudflaredMirror(t, c, bucket)
	return []goldenStep{
		{"install-cloudflared", []string{"install", "cloudflared", "-g", "edge"}},
		{"install-cloudflared-unchanged", []string{"install", "cloudflared", "-g", "edge"}},
		{"uninstall-cloudflared", []string{"uninstall", "cloudflared", "-g", "edge", "-y"}},
		{"uninstall-cloudflared-absent", []string{"uninstall", "cloudflared", "-g", "edge", "-y"}},
	}
}
