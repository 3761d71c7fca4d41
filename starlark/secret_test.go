// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"strings"
	"testing"

	"podmin.dev/podmin/internal/scrub"
)

// TestSecretValue checks what a script can and cannot do with a secret:
// each operation that would reveal it fails with an error that explains
// why and does not hold the value.
func TestSecretValue(t *testing.T) {
	const v = "opaque-value-123"
	prelude := "s = podmin.secret(\"" + v + "\", key = \"pw\")\n"
	ok := map[string]string{
		"print(s, str(s), repr(s), type(s))":                          "<secret pw> <secret pw> <secret pw> secret\n",
		"print(s == podmin.secret(\"" + v + "\"), s != s, bool(s))":   "True False True\n",
		"print(s == \"" + v + "\")":                                   "False\n",
		"print(podmin.secret(s) == s, podmin.secret(s, key = \"x\"))": "True <secret x>\n",
		"print(podmin.secret(\"" + v + "\"))":                         "<secret>\n",
		"print(dir(s))":                                               "[]\n",
	}
	for script, want := range ok {
		e := newEnv(t)
		reg := scrub.New()
		if _, err := e.run(Options{Scrub: reg}, prelude+script+"\n"); err != nil {
			t.Errorf("%s: %v", script, err)
			continue
		}
		if got := e.stdout.String(); got != want {
			t.Errorf("%s: printed %q, want %q", script, got, want)
		}
	}
	fails := map[string]string{
		"s + \"x\"":             "secret + string: a secret is opaque",
		"\"x\" + s":             "string + secret: a secret is opaque",
		"s * 2":                 "secret * int: a secret is opaque",
		"s < s":                 "secrets cannot be ordered",
		"len(s)":                "value of type secret has no len",
		"s[0]":                  "unhandled index operation secret[int]",
		"{s: 1}":                "unhashable type: secret",
		"json.encode(s)":        "cannot encode secret as JSON",
		"s.upper()":             "secret has no .upper field or method",
		"podmin.secret(1)":      "for parameter value: got int, want str or secret",
		"[x for x in s]":        "secret value is not iterable",
		"\"%d\" % s":            "%d format requires integer: cannot convert secret to int",
		"\"x\".join([s])":       "join: in list, want string, got secret",
		"\"abc\".startswith(s)": "got secret",
	}
	for script, want := range fails {
		e := newEnv(t)
		_, err := e.run(Options{Scrub: scrub.New()}, prelude+script+"\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error with %q", script, err, want)
		}
		if err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("%s: the error holds the value: %v", script, err)
		}
	}
}

// TestLiteralsRegisteredBeforeRun checks that the literals a file passes as
// secret values are scrubbed from output printed before the call runs.
func TestLiteralsRegisteredBeforeRun(t *testing.T) {
	script := `
direct = "direct-literal-1"
print(direct, "kw-literal-22", "create-literal-333", "unrelated-literal")
podmin.secret(direct, key = "a")
podmin.secret(value = "kw-literal-22")
def later():
    podmin.secrets.create("c", for_ = "web", value = "create-literal-333")
`
	e := newEnv(t)
	if _, err := e.run(Options{Scrub: scrub.New()}, script); err != nil {
		t.Fatal(err)
	}
	if got, want := e.stdout.String(), "<secret a> <secret> <secret c> unrelated-literal\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}
