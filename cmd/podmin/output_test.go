// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins"
)

func TestOutputNameAndJSONPath(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	if got := c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1", "-o", "name"); got != "deployment/workers/web\n" {
		t.Errorf("deploy -o name = %q", got)
	}
	c.ok("deploy", "api", "-g", "edge", "--image", "api:v1")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "-o", "name"}, "deployment/edge/api\ndeployment/workers/web\n"},
		// kubectl's brace form and RFC 9535 select the same.
		{[]string{"list", "-o", "jsonpath={[*].name}"}, "api\nweb\n"},
		{[]string{"list", "-o", "jsonpath=$[*].name"}, "api\nweb\n"},
		{[]string{"list", "-o", "jsonpath={[?@.nodegroup=='workers'].name}"}, "web\n"},
		// Non-string scalars print as JSON literals, objects as one line.
		{[]string{"use", "-o", "jsonpath={[0].current}"}, "true\n"},
		{[]string{"use", "-o", "name"}, "context/demo\n"},
		{[]string{"use", "-o", "jsonpath={[?@.inEffect==true].selectedBy}"}, "current\n"},
		{[]string{"status", "-o", "name"}, "deployment/edge/api\ndeployment/workers/web\n"},
		{[]string{"list", "-o", "jsonpath={[?@.name=='nothing'].name}"}, ""}, // an empty selection of a list is empty
	} {
		if got := c.ok(tc.args...); got != tc.want {
			t.Errorf("podmin %s = %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	obj := c.ok("list", "-o", "jsonpath={[0]}")
	var m map[string]any
	if strings.Count(obj, "\n") != 1 || json.Unmarshal([]byte(obj), &m) != nil || m["name"] != "api" {
		t.Errorf("list -o jsonpath={[0]} = %q, want one line of JSON", obj)
	}
	if got := c.ok("version", "-o", "jsonpath={.goVersion}"); !strings.HasPrefix(got, "go") {
		t.Errorf("version -o jsonpath={.goVersion} = %q", got)
	}

	before := c.snapshot()
	// A result without item names refuses -o name before anything runs.
	c.fails(exitUsage, "use -o table, json, yaml or jsonpath=EXPR", "version", "-o", "name")
	c.fails(exitUsage, "use -o table, json, yaml or jsonpath=EXPR", "secret", "create", "token", "--for", "web", "-o", "name")
	c.fails(exitUsage, "kubectl's templates of several", "list", "-o", "jsonpath={.a}{.b}")
	c.fails(exitUsage, "write an RFC 9535 path", "list", "-o", "jsonpath=$[")
	c.fails(exitUsage, "needs an expression", "list", "-o", "jsonpath")
	c.fails(exitUsage, "unknown output format", "list", "-o", "xml")
	// A path to one value that is absent is an error, never empty output.
	c.fails(exitFailed, "selected nothing", "version", "-o", "jsonpath={.nope}")
	c.unchanged(before)
}

func TestJSONPathPrintsNumbersExactly(t *testing.T) {
	var b strings.Builder
	if err := printJSONPath(&b, "{.n}", []byte(`{"n": 12345678901234567890, "s": "a\"b", "o": {"k": [1, null]}}`)); err != nil {
		t.Fatal(err)
	}
	if err := printJSONPath(&b, "$['s', 'o']", []byte(`{"n": 1, "s": "a\"b", "o": {"k": [1, null]}}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "12345678901234567890\na\"b\n{\"k\":[1,null]}\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Every command namedResults lists exists and takes -o, so a renamed
// command cannot silently lose -o name.
func TestNamedResultsNameRealCommands(t *testing.T) {
	root := newRoot(&builtins.Env{})
	paths := map[string]bool{}
	for _, c := range allCommands(root) {
		if c.Flags().Lookup("output") != nil {
			paths[c.CommandPath()] = true
		}
	}
	for _, n := range namedResults {
		if !paths[n.command] {
			t.Errorf("namedResults lists %q, which is not a command with -o", n.command)
		}
	}
}
