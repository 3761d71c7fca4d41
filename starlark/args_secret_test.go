// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/scrub"
)

// secretParamRecipe prints what a script could reveal of a secret
// parameter, then stores it where a secret is accepted and reads it back.
const secretParamRecipe = `
def main(ctx, token = podmin.secret_param(), label = "x"):
    """Stores the token."""
    print(ctx.args)
    print(token, type(token), type(ctx.args["token"]), repr(ctx.args))
    print(json.encode({"label": ctx.args.get("label", label)}))
    podmin.secrets.create("api", for_ = "web", value = token)
    print(podmin.secrets.read("api", for_ = "web") == token)
`

// TestSecretParam runs a recipe with --token=…: ctx.args and the
// parameter hold a secret, never a str, so printing them shows <secret
// token> (not a quoted, scrubbed str), and the value is stored as given.
// The scrubber is empty, so nothing but the type hides the value.
func TestSecretParam(t *testing.T) {
	const v = "tok-value-98765"
	for _, args := range [][]string{{"--token=" + v}, {"--token", v, "--label", "y"}} {
		e := newEnv(t)
		reg := scrub.New()
		if _, err := e.run(Options{Scrub: reg}, secretParamRecipe, args...); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		out := e.stdout.String()
		lines := strings.Split(out, "\n")
		if !strings.HasSuffix(lines[0], `"token": <secret token>}`) || lines[1] != `<secret token> secret secret `+lines[0] || lines[3] != "True" {
			t.Errorf("%q printed:\n%s", args, out)
		}
		if strings.Contains(out+e.stderr.String(), v) {
			t.Errorf("%q: the value was printed:\n%s", args, out)
		}
		if !reg.Contains(v) {
			t.Errorf("%q: the value is not registered with the scrubber", args)
		}
	}
}

// TestSecretParamForms checks the optional, required and labelled forms,
// --help, and that a secret argument cannot become a str.
func TestSecretParamForms(t *testing.T) {
	const v = "tok-value-98765"
	script := `
def main(ctx, token = podmin.secret_param(key = "api-token"), pw = podmin.secret_param(required = True)):
    print(token, pw, ctx.args["token"])
`
	e := newEnv(t)
	if _, err := e.run(Options{Scrub: scrub.New()}, script, "--pw="+v); err != nil || e.stdout.String() != "None <secret pw> None\n" {
		t.Fatalf("optional secret omitted: %v %q", err, e.stdout.String())
	}
	e = newEnv(t)
	if _, err := e.run(Options{Scrub: scrub.New()}, script, "--token="+v, "--pw="+v); err != nil || e.stdout.String() != "<secret api-token> <secret pw> <secret api-token>\n" {
		t.Fatalf("labelled: %v %q", err, e.stdout.String())
	}
	e = newEnv(t)
	_, err := e.run(Options{Scrub: scrub.New()}, script, "--token="+v)
	var ae *ArgsError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "missing required parameter(s) --pw") {
		t.Fatalf("required secret omitted: %v", err)
	}
	e = newEnv(t)
	if _, err := e.run(Options{Scrub: scrub.New()}, script, "--help"); err != nil ||
		!strings.Contains(e.stdout.String(), "--token                  secret (optional; None when not given)\n") ||
		!strings.Contains(e.stdout.String(), "--pw                     secret (required)\n") {
		t.Fatalf("--help: %v\n%s", err, e.stdout.String())
	}
	e = newEnv(t)
	_, err = e.run(Options{Scrub: scrub.New()}, "def main(ctx, token = podmin.secret_param()):\n    print(\"token=\" + token)\n", "--token="+v)
	if err == nil || !strings.Contains(err.Error(), "a secret is opaque") || strings.Contains(err.Error(), v) {
		t.Fatalf("concatenation: %v", err)
	}
}

// TestSecretParamInTests passes secret parameters through t.run, as a str
// or a secret, and checks what main receives.
func TestSecretParamInTests(t *testing.T) {
	sum, out := runSuite(t, `
def main(ctx, token = podmin.secret_param(), n = 1):
    if n == 1:
        podmin.secrets.create("api", for_ = "web", value = token)
    return ctx.args

def test_secret_param(t):
    args = t.run(main, token = "tok-value-98765")
    t.assert.eq(type(args["token"]), "secret")
    t.assert.eq(str(args), '{"token": <secret token>}')
    t.assert.eq(podmin.secrets.read("api", for_ = "web"), podmin.secret("tok-value-98765"))
    t.assert.eq(type(t.run(main, token = podmin.secret("tok-value-2", key = "k"), n = 2)["token"]), "secret")
    t.fails(lambda: t.run(main, token = 5), "token: want a secret or str, got int")
    t.fails(lambda: t.run(main, n = podmin.secret("tok-value-3")), "n: want int, got secret")
`, TestOptions{})
	if sum.Passed != 1 || sum.Failed != 0 {
		t.Fatalf("%+v\n%s", sum, out)
	}
	if strings.Contains(out, "tok-value") {
		t.Errorf("a value was printed:\n%s", out)
	}
}
