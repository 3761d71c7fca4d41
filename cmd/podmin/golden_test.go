// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/builtins"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// TestJSONGolden runs every command whose result is data with -o json in
// one deterministic cluster and compares the output with its golden file.
// Paths, the registry's address and times vary per run and are replaced
// by placeholders; everything else, field names and order included, is
// the documented schema. go test -run TestJSONGolden -update rewrites them.
func TestJSONGolden(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	upstream := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(upstream.Close)
	host := strings.TrimPrefix(upstream.URL, "http://")
	layer := static.NewLayer([]byte("golden layer"), types.OCIUncompressedLayer)
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(parseRef(t, host+"/team/tool:v1"), img); err != nil {
		t.Fatal(err)
	}
	ctxDir := filepath.Join(c.root, "app")
	if err := os.Mkdir(ctxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ctxDir, "Containerfile", "FROM scratch\nCOPY hello.txt /hello.txt\n")
	writeFile(t, ctxDir, "hello.txt", "hello\n")
	manifest := filepath.Join(c.root, "web.yaml")
	value := writeFile(t, c.root, "value.txt", "golden value")

	steps := []struct {
		name string
		args []string
	}{
		{"connect", []string{"connect", "demo", "--provider", "local", "--bucket", bucket}},
		{"use-list", []string{"use"}},
		{"use", []string{"use", "demo"}},
		{"init", []string{"init", "web", "-g", "workers", "--image", "hello:v1", "-f", manifest}},
		{"validate", []string{"validate", "-f", manifest}},
		{"build", []string{"build", "-t", "hello:v1", "--platform", "linux/amd64", ctxDir}},
		{"pull", []string{"pull", host + "/team/tool:v1"}},
		{"push", []string{"push", "hello:v1"}},
		{"deploy", []string{"deploy", "web", "-g", "workers", "-f", manifest}},
		{"deploy-service", []string{"deploy", "api", "-g", "workers", "--image", "hello:v1", "--service"}},
		{"list", []string{"list"}},
		{"preview", []string{"preview", "-g", "workers"}},
		{"secret-create", []string{"secret", "create", "token", "--for", "web", "--file", value}},
		{"secret-update", []string{"secret", "update", "token", "--for", "web", "--file", value}},
		{"secret-list", []string{"secret", "list"}},
		{"secret-destroy", []string{"secret", "destroy", "token", "--for", "web", "-y"}},
		{"delete", []string{"delete", "api", "-g", "workers", "-y"}},
		{"delete-absent", []string{"delete", "api", "-g", "workers", "-y", "--ignore-not-found"}},
		{"version", []string{"version"}},
	}
	covered := map[string]bool{}
	for _, s := range steps {
		out, errs, code := c.run(append(s.args, "-o", "json")...)
		if code != 0 {
			t.Fatalf("podmin %s -o json: exit %d\n%s", strings.Join(s.args, " "), code, errs)
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("podmin %s -o json printed no JSON:\n%s", strings.Join(s.args, " "), out)
		}
		got := strings.ReplaceAll(out, c.root, "$ROOT")
		got = strings.ReplaceAll(got, host, "$REGISTRY")
		got = timestamp.ReplaceAllString(got, "$$TIME")
		got = strings.ReplaceAll(got, `"`+runtime.Version()+`"`, `"$GO"`)
		got = strings.ReplaceAll(got, `"`+runtime.GOOS+"/"+runtime.GOARCH+`"`, `"$PLATFORM"`)
		file := filepath.Join("testdata", "golden", s.name+".json")
		if *updateGolden {
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v: run go test -run TestJSONGolden -update", err)
		}
		if got != string(want) {
			t.Errorf("podmin %s -o json differs from %s:\n%s", strings.Join(s.args, " "), file, got)
		}
		cmd, _, _ := newRoot(&builtins.Env{}).Find(s.args)
		covered[cmd.CommandPath()] = true
	}
	for _, cmd := range runnableCommands() {
		if cmd.Flags().Lookup("output") != nil && !covered[cmd.CommandPath()] {
			switch cmd.CommandPath() {
			case "podmin secret delete", "podmin secret restore":
				// aws-secrets-manager only: TestSecretsManagerJSON.
			case "podmin run":
				// The dry-run plan has its own golden tests (starlark/plan_test.go).
			default:
				t.Errorf("%s prints data but has no golden -o json step", cmd.CommandPath())
			}
		}
	}
}
