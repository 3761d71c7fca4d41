// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/oci/build"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
)

func writeContext(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o775
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func buildIndex(t *testing.T, dir string, base build.BaseFunc, ps ...v1.Platform) (v1.ImageIndex, error) {
	t.Helper()
	return build.Build(context.Background(), build.Options{ContextDir: dir, Platforms: ps, Base: base})
}

// image returns the platform's image and a listing of all its layers.
func image(t *testing.T, idx v1.ImageIndex, i int) (v1.Image, []string) {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(m.Manifests[i].Digest)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	var list []string
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(tr)
			list = append(list, fmt.Sprintf("%s %o %d:%d %s", h.Name, h.Mode, h.Uid, h.Gid, body))
			if !h.ModTime.Equal(time.Unix(0, 0)) {
				t.Errorf("%s has mtime %v", h.Name, h.ModTime)
			}
		}
		rc.Close()
	}
	return img, list
}

const containerfile = `# a comment
ARG BASE=scratch
FROM ${BASE}
ARG TARGETARCH
ARG VERSION=1.0
ENV APP_VERSION=${VERSION} \
    PLATFORM_ARCH=$TARGETARCH
LABEL org.opencontainers.image.version="${VERSION}" team=web
WORKDIR /srv
COPY --chown=1000:2000 bin/${TARGETARCH}/app ./bin/
COPY --chmod=0600 conf/*.toml /etc/app/
COPY conf/c.yaml /
COPY run.sh static /opt/
ENTRYPOINT ["/srv/bin/app"]
CMD ["--port", "8443"]
`

func testContext(t *testing.T) string {
	return writeContext(t, map[string]string{
		"Containerfile":           containerfile,
		".dockerignore":           "# secrets\n**/*.key\nstatic/private\n!static/private/keep.txt\n",
		"bin/amd64/app":           "amd64",
		"bin/arm64/app":           "arm64",
		"conf/a.toml":             "a",
		"conf/b.toml":             "b",
		"conf/c.yaml":             "c",
		"run.sh":                  "#!/bin/sh",
		"static/index.html":       "<p>",
		"static/tls.key":          "secret",
		"static/private/x":        "hidden",
		"static/private/keep.txt": "kept",
	})
}

func TestBuildSubset(t *testing.T) {
	dir := testContext(t)
	idx, err := buildIndex(t, dir, nil, amd64, arm64)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := idx.IndexManifest()
	if len(m.Manifests) != 2 || m.Manifests[1].Platform.String() != "linux/arm64/v8" || m.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index %+v", m)
	}
	img, files := image(t, idx, 1)
	want := []string{
		"srv/ 755 0:0 ", "srv/bin/ 755 1000:2000 ", "srv/bin/app 644 1000:2000 arm64",
		"etc/ 755 0:0 ", "etc/app/ 600 0:0 ", "etc/app/a.toml 600 0:0 a", "etc/app/b.toml 600 0:0 b",
		"c.yaml 644 0:0 c",
		"opt/ 755 0:0 ", "opt/index.html 644 0:0 <p>", "opt/private/ 755 0:0 ", "opt/private/keep.txt 644 0:0 kept", "opt/run.sh 755 0:0 #!/bin/sh",
	}
	if !slices.Equal(files, want) {
		t.Errorf("layers:\n%s\nwant:\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
	}
	cf, _ := img.ConfigFile()
	c := cf.Config
	if c.User != build.ScratchUser || c.WorkingDir != "/srv" || !slices.Equal(c.Entrypoint, []string{"/srv/bin/app"}) ||
		!slices.Equal(c.Cmd, []string{"--port", "8443"}) || c.Labels["org.opencontainers.image.version"] != "1.0" || c.Labels["team"] != "web" ||
		!slices.Contains(c.Env, "APP_VERSION=1.0") || !slices.Contains(c.Env, "PLATFORM_ARCH=arm64") {
		t.Errorf("config %+v", c)
	}
	if cf.Architecture != "arm64" || cf.Variant != "v8" || !cf.Created.Time.Equal(time.Unix(0, 0)) {
		t.Errorf("config platform %s/%s created %v", cf.Architecture, cf.Variant, cf.Created)
	}
}

func TestBuildIsReproducible(t *testing.T) {
	dir := testContext(t)
	a, err := buildIndex(t, dir, nil, amd64, arm64)
	if err != nil {
		t.Fatal(err)
	}
	// Other timestamps and permissions bits that do not matter.
	later := time.Now().Add(time.Hour)
	_ = os.Chtimes(filepath.Join(dir, "conf/a.toml"), later, later)
	_ = os.Chmod(filepath.Join(dir, "bin/amd64/app"), 0o600)
	b, err := buildIndex(t, dir, nil, amd64, arm64)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds of one context: %s and %s", da, db)
	}
}

func TestBuildFromLocalBase(t *testing.T) {
	ctx := context.Background()
	store := oci.NewStore(t.TempDir())
	base, err := buildIndex(t, writeContext(t, map[string]string{"Containerfile": "FROM scratch\nCOPY a /a\nCMD [\"base\"]\n", "a": "a"}), nil, amd64, arm64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Write(ctx, "registry.podmin.internal/apps/base", base, "v1"); err != nil {
		t.Fatal(err)
	}
	dir := writeContext(t, map[string]string{"Containerfile": "FROM base:v1\nCOPY b /b\nENTRYPOINT [\"/b\"]\n", "b": "b"})
	idx, err := buildIndex(t, dir, build.StoreBase(store, false), arm64)
	if err != nil {
		t.Fatal(err)
	}
	img, files := image(t, idx, 0)
	if !slices.Equal(files, []string{"a 644 0:0 a", "b 644 0:0 b"}) {
		t.Errorf("files %v", files)
	}
	cf, _ := img.ConfigFile()
	if cf.Config.Cmd != nil || !slices.Equal(cf.Config.Entrypoint, []string{"/b"}) {
		t.Errorf("a new ENTRYPOINT must drop the base CMD: %+v", cf.Config)
	}
	_, err = buildIndex(t, dir, build.StoreBase(store, false), v1.Platform{OS: "linux", Architecture: "riscv64"})
	if err == nil || !strings.Contains(err.Error(), "has no linux/riscv64 variant") {
		t.Errorf("missing platform error = %v", err)
	}
}

func TestBuildRejects(t *testing.T) {
	for _, tc := range []struct{ file, err string }{
		{"FROM scratch\nRUN make", "line 2: RUN: not supported by podmin build: it executes commands inside the image, which needs a container runtime; podmin build only packages files: run the commands on the host or in CI and COPY their output"},
		{"FROM scratch\nADD https://x/y /y", "line 2: ADD: not supported by podmin build: it downloads URLs and unpacks archives implicitly; download or unpack beforehand and use COPY"},
		{"FROM scratch\nFROM scratch", "line 2: FROM: a second FROM starts a multi-stage build, which podmin build does not support: build artifacts beforehand and COPY them into one stage"},
		{"FROM golang AS build", "line 1: FROM: named stages are for multi-stage builds, which podmin build does not support: drop \"AS build\" and COPY prebuilt artifacts"},
		{"FROM scratch\nCOPY --from=build /a /a", "line 2: COPY: --from copies from another stage or image, which podmin build does not support: build the files beforehand and COPY them from the context"},
		{"FROM scratch\nUSER 1000", "line 2: USER: not supported by podmin build: set securityContext.runAsUser in the Pod instead (FROM scratch images already run as 65532)"},
		{"FROM scratch\nEXPOSE 80", "line 2: EXPOSE: not supported by podmin build: declare ports in the DaemonSet's containers and the Service instead"},
		{"FROM scratch\nFROBNICATE x", "line 2: FROBNICATE: unknown or unsupported instruction: podmin build supports FROM, ARG, ENV, LABEL, WORKDIR, COPY, ENTRYPOINT and CMD"},
		{"ENV A=b\nFROM scratch", "line 1: ENV: comes before FROM: start the Containerfile with FROM (ARG may precede it)"},
		{"ARG X=1", "the Containerfile has no FROM: start it with FROM scratch or a base image"},
		{"FROM scratch\nCOPY --chown=app a /a", "line 2: COPY: --chown=app must be numeric UID[:GID] such as 65532:65532: the build cannot resolve user names"},
		{"FROM scratch\nCOPY --chmod=999 a /a", "line 2: COPY: --chmod=999 must be an octal mode such as 0755"},
		{"FROM scratch\nCOPY ../etc/passwd /a", "line 2: COPY: source \"../etc/passwd\" leaves the build context: sources are relative to the context directory"},
		{"FROM scratch\nCOPY missing /a", "COPY: \"missing\" matches nothing in the build context"},
		{"FROM scratch\nCOPY a a /dir", "line 2: COPY: several sources need a directory destination ending in '/', got \"/dir\""},
		{"FROM scratch\nCOPY x.key /a", "COPY: \"x.key\" matches nothing in the build context"},
	} {
		dir := writeContext(t, map[string]string{"Containerfile": tc.file, "a": "a", "x.key": "k", ".dockerignore": "*.key"})
		_, err := buildIndex(t, dir, nil, amd64)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error = %v\nwant %q", tc.file, err, tc.err)
		}
	}
}
