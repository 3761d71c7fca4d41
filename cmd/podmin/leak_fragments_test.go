// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fragmentCase is one attempt to get a piece of a secret value out of
// Podmin: an error that quotes a prefix, a parsed component, one
// character and its position, or a whole file. Scripts spell a plain-str
// copy of a registered value as VALUE; STORE is the local secrets store's
// file holding the value "tok", FILE a file whose content is FILECONTENT
// (VALUE substituted).
type fragmentCase struct {
	name string
	// mode is "run" (podmin run, then also through podmin test and the
	// REPL), or "process" (a fresh podmin process that never registered
	// the value, running args).
	mode        string
	script      string
	args        []string
	fileContent string
}

// The value has a separator of every kind a parser splits on, so each
// piece an error could quote is a fragment, not the whole value.
func fragmentValue(t *testing.T) string {
	const letters = "BCDFGHJKLMNPQRSTVWXZ" // no words, no hex digits
	chunk := func() string {
		b := make([]byte, 5)
		for i := range b {
			n, err := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
			if err != nil {
				t.Fatal(err)
			}
			b[i] = letters[n.Int64()]
		}
		return string(b)
	}
	return "lk-" + chunk() + "/" + chunk() + " &<" + chunk() + ">=" + chunk() + ":" + chunk() + "," + chunk() + "@" + chunk()
}

const registerRaw = "raw = \"VALUE\"\npodmin.secret(raw, key = \"pw\")\n"

var fragmentCases = []fragmentCase{
	// prefixes
	{name: "image as a container name prefix", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = raw)\n"},
	{name: "named image prefix", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = raw + \"=hello:v1\")\n"},
	{name: "env name prefix", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\", env = [raw])\n"},
	{name: "port pieces", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\", port = [raw])\n"},
	{name: "cpu quantity", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\", cpu = raw[3:])\n"},
	{name: "namespace prefix", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\", namespace = raw[:12])\n"},
	{name: "secret keys", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\", secret = [raw])\n"},
	{name: "deployment name", mode: "run", script: registerRaw + "podmin.deployments.deploy(raw[:9], nodegroup = \"workers\", image = \"hello:v1\")\n"},
	{name: "confirm names a piece", mode: "run", script: registerRaw + "podmin.deployments.delete(\"web\", nodegroup = \"workers\", confirm = raw[:9])\n"},
	{name: "context name", mode: "run", script: registerRaw + "podmin.contexts.use(raw[:10])\n"},
	{name: "disconnect names a piece", mode: "run", script: registerRaw + "podmin.contexts.disconnect(raw[:10], confirm = True)\n"},
	// components
	{name: "pull components", mode: "run", script: registerRaw + "podmin.images.pull(raw)\n"},
	{name: "push components", mode: "run", script: registerRaw + "podmin.images.push(raw)\n"},
	{name: "push destination", mode: "run", script: registerRaw + "podmin.images.push(\"hello:v1\", destination = raw)\n"},
	{name: "image reference components", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"x=\" + raw)\n"},
	{name: "build tag components", mode: "run", script: registerRaw + "podmin.images.build(\".\", tag = [raw])\n"},
	{name: "build platform", mode: "run", script: registerRaw + "podmin.images.build(\".\", tag = [\"x:v1\"], platform = [raw])\n"},
	{name: "secret key", mode: "run", script: registerRaw + "podmin.secrets.create(raw, for_ = \"web\", value = \"another value\")\n"},
	{name: "secret pod", mode: "run", script: registerRaw + "podmin.secrets.create(\"k\", for_ = raw, value = \"another value\")\n"},
	{name: "secrets provider", mode: "run", script: registerRaw + "podmin.secrets.list(provider = raw)\n"},
	{name: "setup NodeGroup settings", mode: "run", script: registerRaw + "podmin.cluster.setup(nodegroup = [\"web,\" + raw[:20]], confirm = True)\n"},
	{name: "setup NodeGroup spec", mode: "run", script: registerRaw + "podmin.cluster.setup(nodegroup = [raw], confirm = True)\n"},
	{name: "setup otel_logs keys", mode: "run", script: registerRaw + "podmin.cluster.setup(nodegroup = [\"web\"], otel_logs = raw, confirm = True)\n"},
	{name: "setup size value", mode: "run", script: registerRaw + "podmin.cluster.setup(nodegroup = [\"web,size=\" + raw[3:12]], confirm = True)\n"},
	// single characters with their position
	{name: "nodegroup character", mode: "run", script: registerRaw + "podmin.deployments.deploy(\"web\", nodegroup = raw, image = \"hello:v1\")\n"},
	{name: "cluster ID character", mode: "run", script: registerRaw + "podmin.contexts.connect(raw, provider = \"local\", bucket = \"b-bucket\")\n"},
	{name: "bucket name character", mode: "run", script: registerRaw + "podmin.contexts.connect(\"new\", provider = \"local\", bucket = raw[:12])\n"},
	{name: "delete nodegroup character", mode: "run", script: registerRaw + "podmin.deployments.delete(\"web\", nodegroup = raw[:8], confirm = True)\n"},
	// whole files
	{name: "validate the secrets store file", mode: "process", args: []string{"validate", "-f", "STORE"}},
	{name: "deploy the secrets store file", mode: "process", args: []string{"deploy", "web", "-g", "workers", "-f", "STORE"}},
	{name: "validate a list holding the value", mode: "process", args: []string{"validate", "-f", "FILE"}, fileContent: "- VALUE\n"},
	{name: "validate a JSON document", mode: "process", args: []string{"validate", "-f", "FILE"}, fileContent: "{VALUE}\n"},
	{name: "validate a broken YAML document", mode: "process", args: []string{"validate", "-f", "FILE"}, fileContent: "a: [VALUE\n"},
	{name: "recipe validates the store file", mode: "process", args: []string{"run", "SCRIPT"}, fileContent: "podmin.manifests.validate(file = \"STORE\")\n"},
	{name: "recipe test validates the store file", mode: "process", args: []string{"test", "SCRIPT_test"}, fileContent: "def test_it(t):\n    podmin.manifests.validate(file = \"STORE\")\n"},
	{name: "in-process validate of the store file", mode: "run", script: "podmin.manifests.validate(file = \"STORE\")\n"},
}

// positionRE finds an error naming one character and where it is.
var positionRE = regexp.MustCompile(`character .{1,8} at position \d+`)

// fragmentLeaks lists each run of 4 or more bytes of value, and each
// character named with its position, that outs hold.
func fragmentLeaks(value string, outs []string) []string {
	var found []string
	for i, o := range outs {
		for j := 0; j+4 <= len(value); j++ {
			if w := value[j : j+4]; strings.Contains(o, w) {
				found = append(found, fmt.Sprintf("output %d holds %q of the value:\n%s", i, w, o))
				break
			}
		}
		if m := positionRE.FindString(o); m != "" {
			found = append(found, fmt.Sprintf("output %d names a character and its position (%s):\n%s", i, m, o))
		}
	}
	return found
}

// TestFragmentLeaks runs every fragment case (the run cases also as a
// recipe test and in the REPL) and requires that no output holds any
// four bytes of the value, nor a character of it with its position.
func TestFragmentLeaks(t *testing.T) {
	attempts := 0
	for _, tc := range fragmentCases {
		modes := []string{tc.mode}
		if tc.mode == "run" {
			modes = []string{"run", "test", "repl"}
		}
		for _, mode := range modes {
			attempts++
			t.Run(tc.name+" ("+mode+")", func(t *testing.T) {
				value := fragmentValue(t)
				c := secretCLI(t)
				c.stdin = value
				c.ok("secret", "create", "tok", "--for", "web", "--stdin")
				c.stdin = ""
				store := filepath.Join(c.root, "data", "podmin", "secrets", "demo", "default", "web", "tok")
				if b, err := os.ReadFile(store); err != nil || string(b) != value {
					t.Fatalf("the store file does not hold the value: %v", err)
				}
				scripts := filepath.Join(c.root, "scripts")
				if err := os.MkdirAll(scripts, 0o755); err != nil {
					t.Fatal(err)
				}
				subst := func(s string) string {
					s = strings.ReplaceAll(s, "STORE", store)
					return strings.ReplaceAll(s, "VALUE", strings.ReplaceAll(value, `"`, `\"`))
				}
				var outs []string
				switch mode {
				case "run":
					out, errs, _ := c.run("run", c.script("frag.star", subst(tc.script)))
					outs = append(outs, out, errs)
				case "test":
					if err := os.WriteFile(filepath.Join(scripts, "frag_test.star"), []byte(asTest(subst(tc.script))), 0o644); err != nil {
						t.Fatal(err)
					}
					out, errs, _ := c.run("test", scripts)
					outs = append(outs, out, errs)
				case "repl":
					c.stdin = subst(tc.script)
					out, errs, _ := c.run("repl")
					outs = append(outs, out, errs)
				case "process":
					file := filepath.Join(c.root, "input.yaml")
					content := strings.ReplaceAll(subst(tc.fileContent), `\"`, `"`)
					if tc.args[0] == "run" || tc.args[0] == "test" {
						file = filepath.Join(scripts, "frag_test.star")
						content = subst(tc.fileContent)
					}
					if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
					args := make([]string, len(tc.args))
					for i, a := range tc.args {
						a = strings.ReplaceAll(a, "SCRIPT_test", scripts)
						a = strings.ReplaceAll(a, "SCRIPT", file)
						args[i] = strings.ReplaceAll(subst(a), "FILE", file)
					}
					cmd := exec.Command(os.Args[0], args...)
					cmd.Env = append(os.Environ(), "PODMIN_TEST_RUN_MAIN=1")
					for k, v := range c.env {
						cmd.Env = append(cmd.Env, k+"="+v)
					}
					out, err := cmd.CombinedOutput()
					if err == nil {
						t.Errorf("podmin %s succeeded:\n%s", strings.Join(args, " "), out)
					}
					outs = append(outs, string(out))
				}
				for _, p := range append(leaks(value, outs, nil), fragmentLeaks(value, outs)...) {
					t.Error(p)
				}
				if strings.TrimSpace(strings.Join(outs, "")) == "" {
					t.Errorf("no output at all: the attempt proves nothing")
				}
			})
		}
	}
	t.Logf("%d fragment attempts", attempts)
	if attempts < 80 {
		t.Errorf("%d fragment attempts, want at least 80", attempts)
	}
}

// TestFragmentCheckerSeesFragments proves the fragment checker is not
// vacuous: a prefix, a component and a named character are all found.
func TestFragmentCheckerSeesFragments(t *testing.T) {
	value := fragmentValue(t)
	for _, out := range []string{
		fmt.Sprintf("%q is not a valid container name", value[:9]),
		fmt.Sprintf("repository component %q must be lowercase", value[3:8]),
		"invalid NodeGroup ID \"<secret pw>\": character 'Q' at position 4 is not allowed",
	} {
		if len(fragmentLeaks(value, []string{out})) == 0 {
			t.Errorf("not found in %q", out)
		}
	}
}
