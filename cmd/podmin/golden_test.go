// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/base64"
	"encoding/hex"
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
	"podmin.dev/podmin/internal/secrets/secretstest"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// nonce is a bucket's create nonce, drawn afresh by each connect.
var nonce = regexp.MustCompile(`"(bucketNonce|caNonce|nonce)": "[0-9a-f]{64}"`)

// writeID matches the random ID of an index write a revision records.
var writeID = regexp.MustCompile(`"write": "[0-9a-f]{16}"`)

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
	ctxDir := buildContext(t, c.root)
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
		// A second revision of web, listed and rolled back, so web's
		// payloads are the first revision's again for the steps after.
		{"deploy-update", []string{"deploy", "web", "-g", "workers", "-f", manifest, "--image", "hello:v2"}},
		{"history", []string{"history", "web", "-g", "workers"}},
		{"rollback", []string{"rollback", "web", "-g", "workers"}},
		{"list", []string{"list"}},
		{"status", []string{"status", "-g", "workers"}},
		{"preview", []string{"preview", "-g", "workers"}},
		{"secret-create", []string{"secret", "create", "token", "--for", "web", "--file", value}},
		{"secret-update", []string{"secret", "update", "token", "--for", "web", "--file", value}},
		{"secret-list", []string{"secret", "list"}},
		{"secret-destroy", []string{"secret", "destroy", "token", "--for", "web", "-y"}},
		{"delete", []string{"delete", "api", "-g", "workers", "-y"}},
		{"delete-absent", []string{"delete", "api", "-g", "workers", "-y", "--ignore-not-found"}},
		{"version", []string{"version"}},
		// The cluster lifecycle comes last: destroy removes the context.
		{"setup", []string{"setup", "--nodegroup", "workers,size=2", "--nodegroup", "edge", "-y"}},
		{"teardown", []string{"teardown", "-y"}},
		{"destroy", []string{"destroy", "-y"}},
	}
	covered := map[string]bool{}
	outputs := map[string]string{}
	var caSecrets []string
	for _, s := range steps {
		if s.name == "setup" {
			// install, uninstall (cloudflared) and fetch, in the cluster
			// the steps above leave behind, before its lifecycle ends it.
			for _, s := range append(append(indexGoldenSteps(t, bucket), installGoldenSteps(t, c, bucket)...), fetchGoldenSteps(t, c)...) {
				checkGolden(t, c, s.name, s.args)
				cmd, _, _ := newRoot(&builtins.Env{}).Find(s.args)
				covered[cmd.CommandPath()] = true
			}
		}
		outputs[s.name] = checkGolden(t, c, s.name, s.args, host, "$REGISTRY")
		cmd, _, _ := newRoot(&builtins.Env{}).Find(s.args)
		covered[cmd.CommandPath()] = true
		if s.name == "setup" {
			// Read before destroy deletes them.
			caSecrets = secretFragments(t, filepath.Join(c.root, "data", "podmin", "secrets", "demo", "_system"))
		}
	}
	if len(caSecrets) == 0 {
		t.Fatal("setup stored no CA secret to check the outputs against")
	}
	for name, out := range outputs {
		for _, f := range caSecrets {
			if strings.Contains(out, f) {
				t.Errorf("podmin %s -o json prints a secret value: %q", name, f)
			}
		}
	}
	for _, cmd := range runnableCommands() {
		if cmd.Flags().Lookup("output") != nil && !covered[cmd.CommandPath()] {
			switch cmd.CommandPath() {
			case "podmin secret delete", "podmin secret restore":
				// aws-secrets-manager only: TestSecretsManagerJSONGolden.
			case "podmin run":
				// The dry-run plan has its own golden tests (starlark/plan_test.go).
			default:
				t.Errorf("%s prints data but has no golden -o json step", cmd.CommandPath())
			}
		}
	}
}

// secretFragments returns what a leak of any secret value stored below dir
// would show in text: the value raw, in base64 and in hex, and each of
// its lines of 16 bytes or more (the body of a PEM block).
func secretFragments(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		v, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, string(v), base64.StdEncoding.EncodeToString(v), base64.RawURLEncoding.EncodeToString(v), hex.EncodeToString(v))
		for _, line := range strings.Split(string(v), "\n") {
			if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				out = append(out, line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkGolden runs podmin args -o json and compares the output, with
// run-specific values replaced (old, new pairs), to testdata/golden/name.json.
// It returns the normalized output.
func checkGolden(t *testing.T, c *cli, name string, args []string, replace ...string) string {
	t.Helper()
	out, errs, code := c.run(append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("podmin %s -o json: exit %d\n%s", strings.Join(args, " "), code, errs)
	}
	if !json.Valid([]byte(out)) {
		t.Fatalf("podmin %s -o json printed no JSON:\n%s", strings.Join(args, " "), out)
	}
	got := strings.ReplaceAll(out, c.root, "$ROOT")
	for i := 0; i+1 < len(replace); i += 2 {
		got = strings.ReplaceAll(got, replace[i], replace[i+1])
	}
	got = timestamp.ReplaceAllString(got, "$$TIME")
	got = nonce.ReplaceAllString(got, `"$1": "$$NONCE"`)
	got = writeID.ReplaceAllString(got, `"write": "$$WRITE"`)
	got = strings.ReplaceAll(got, `"`+runtime.Version()+`"`, `"$GO"`)
	got = strings.ReplaceAll(got, `"`+runtime.GOOS+"/"+runtime.GOARCH+`"`, `"$PLATFORM"`)
	file := filepath.Join("testdata", "golden", name+".json")
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
		t.Fatalf("%v: run go test -run %s -update", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("podmin %s -o json differs from %s:\n%s", strings.Join(args, " "), file, got)
	}
	return got
}

// TestSecretsManagerJSONGolden covers the commands only Secrets Manager
// supports, through the real SDK against its wire-protocol fake.
func TestSecretsManagerJSONGolden(t *testing.T) {
	smFake := secretstest.NewFakeSecretsManager(t)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", smFake.URL())
	awsTestEnv(t, "")
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket", "--secrets-provider", "aws-secrets-manager")
	value := writeFile(t, c.root, "value.txt", "golden value")
	c.ok("secret", "create", "token", "--for", "web", "--file", value)
	checkGolden(t, c, "secret-delete", []string{"secret", "delete", "token", "--for", "web", "-y"})
	checkGolden(t, c, "secret-list-scheduled", []string{"secret", "list"})
	checkGolden(t, c, "secret-restore", []string{"secret", "restore", "token", "--for", "web"})
}

// buildContext writes a build context below dir, "app", holding a
// Containerfile that copies one file into a scratch image.
func buildContext(t *testing.T, dir string) string {
	t.Helper()
	ctxDir := filepath.Join(dir, "app")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ctxDir, "Containerfile", "FROM scratch\nCOPY hello.txt /hello.txt\n")
	writeFile(t, ctxDir, "hello.txt", "hello\n")
	return ctxDir
}
