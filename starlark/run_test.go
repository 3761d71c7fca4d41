// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"strings"
	"testing"

	star "go.starlark.net/starlark"
)

// destroyForTest is a test-only destructive builtin: it shows how later
// destructive operations get the one guard from Destructive alone.
var destroyForTest = &Builtin{
	Name: "testing.destroy", Returns: "None", Mutates: true, Destructive: true, Doc: "Destroys nothing (test only).",
	Params: []Param{clusterParam, confirmParam},
	impl: func(c *call) (star.Value, error) {
		var cluster string
		if err := c.unpack(&cluster); err != nil {
			return nil, err
		}
		return star.String("destroyed " + cluster), nil
	},
}

func TestBadScripts(t *testing.T) {
	cases := []struct {
		name   string
		files  map[string]string
		script string
		opts   Options
		want   []string
	}{
		{name: "syntax error", script: "x = 1\ndef f(:\n", want: []string{"main.star:2:8: got ':', want ')'"}},
		{name: "unknown keyword", script: "\n\npodmin.deployments.deploy(\"web\", nodgroup = \"w\", image = \"x\")\n",
			want: []string{"main.star:3:26: in <toplevel>", "error in podmin.deployments.deploy: unexpected keyword argument \"nodgroup\" (did you mean nodegroup?)"}},
		{name: "wrong type", script: "podmin.deployments.deploy(\"web\", nodegroup = 1, image = \"x\")\n",
			want: []string{"main.star:1:26", "error in podmin.deployments.deploy: for parameter \"nodegroup\": got int, want string"}},
		{name: "wrong list element", script: "podmin.manifests.validate(file = \"x.yaml\", image = [\"a\", 2])\n",
			want: []string{"main.star:1:26", "for parameter \"image\": element 1 is int, want str"}},
		{name: "two positionals", script: "podmin.deployments.delete(\"web\", \"workers\")\n",
			want: []string{"main.star:1:26", "got 2 positional arguments, want at most 1 (name): pass the others by keyword"}},
		{name: "missing confirm", script: "def main(ctx):\n    podmin.testing.destroy(\"test\")\n",
			want: []string{"main.star:2:27: in main", "destructive operation not confirmed: podmin.testing.destroy is destructive: pass confirm = \"test\" (the cluster) or confirm = True, or run the script with podmin run --yes (-y)"}},
		{name: "wrong confirm", script: "podmin.testing.destroy(\"test\", confirm = \"prod\")\n",
			want: []string{"main.star:1:23", "confirm = \"prod\" does not match the cluster \"test\""}},
		{name: "builtin error", script: "\npodmin.deployments.delete(\"web\", nodegroup = \"workers\", confirm = True)\n",
			want: []string{"main.star:2:26", "deployment workers/web does not exist: nothing was changed; pass ignore_not_found=True"}},
		{name: "load cycle", files: map[string]string{
			"a.star": "load(\"./b.star\", \"b\")\na = 1\n",
			"b.star": "\nload(\"./a.star\", \"a\")\nb = 2\n",
		}, script: "load(\"./a.star\", \"a\")\n", want: []string{"main.star:1:1: in <toplevel>", "load cycle: ", "a.star:1 loads ", "b.star:2 loads ", "a.star: remove one of these loads"}},
		{name: "unknown @name", files: map[string]string{
			"podmin.star.lock": `{"recipes": {"platform": {"path": "."}}}`,
		}, script: "\nload(\"@nope//x.star\", \"f\")\n", want: []string{"main.star:2:1", "unknown repository @nope: ", `pins ["@platform"]: add @nope to it`}},
		{name: "error inside a loaded file", files: map[string]string{
			"lib.star": "def f():\n    return 1 // 0\nx = f()\n",
		}, script: "load(\"./lib.star\", \"x\")\n", want: []string{"main.star:1:1", "lib.star:3:6: in <toplevel>", "lib.star:2:14: in f", "floored division by zero"}},
		{name: "step limit", opts: Options{MaxSteps: 10000}, script: "n = 0\nwhile True:\n    n += 1\n",
			want: []string{"main.star:1", "exceeded its step limit of 10000 (a runaway loop?)"}},
		{name: "fail", script: "def main(ctx):\n    fail(\"boom\")\n", want: []string{"main.star:2:9: in main", "error in fail: fail: boom"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			for n, c := range tc.files {
				e.write(n, c)
			}
			h := e.host(tc.opts)
			h.module = newModule(append(Builtins(), destroyForTest))
			err := h.Run(context.Background(), e.write("main.star", tc.script), nil)
			var se *ScriptError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a script error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(se.Error(), w) {
					t.Errorf("error lacks %q:\n%s", w, se.Error())
				}
			}
		})
	}
}

func TestConfirmAndYes(t *testing.T) {
	for _, tc := range []struct {
		yes    bool
		script string
	}{
		{false, `print(podmin.testing.destroy("test", confirm = "test"))`},
		{true, `print(podmin.testing.destroy("test"))`},
	} {
		e := newEnv(t)
		h := e.host(Options{Yes: tc.yes})
		h.module = newModule(append(Builtins(), destroyForTest))
		if err := h.Run(context.Background(), e.write("main.star", tc.script), nil); err != nil {
			t.Fatal(err)
		}
		if e.stdout.String() != "destroyed test\n" {
			t.Fatalf("stdout %q", e.stdout.String())
		}
	}
}

func TestMainArguments(t *testing.T) {
	const script = `
def main(ctx, env, replicas = 1, ratio = 0.5, verbose = False, tags = [], name = None):
    """Shows its arguments.

    More details.
    """
    print(ctx.args)
    print(env, replicas, ratio, verbose, tags, name, ctx.dry_run, ctx.context.cluster)
`
	e := newEnv(t)
	if _, err := e.run(Options{}, script, "--env=prod", "--replicas", "3", "--ratio=1.5", "--verbose", "--tags=a", "--tags=b", "--name=x"); err != nil {
		t.Fatal(err)
	}
	want := `{"env": "prod", "name": "x", "ratio": 1.5, "replicas": 3, "tags": ["a", "b"], "verbose": True}
prod 3 1.5 True ["a", "b"] x False test
`
	if e.stdout.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", e.stdout.String(), want)
	}

	e.stdout.Reset()
	if _, err := e.run(Options{}, script, "--help"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"\n\nShows its arguments.\n\nMore details.\n\nparameters:\n", "--env                    string (required)", "--replicas               int (default 1)", "--tags                   list of strings (default [])"} {
		if !strings.Contains(e.stdout.String(), w) {
			t.Errorf("help lacks %q:\n%s", w, e.stdout.String())
		}
	}

	for args, want := range map[string]string{
		"--replicas=x":                      "--replicas: want an integer, got \"x\"",
		"--env=a --nope=1":                  "unknown parameter \"--nope\": main takes --env, --replicas, --ratio, --verbose, --tags, --name",
		"--replicas=2":                      "missing required parameter(s) --env",
		"--env=a --verbose=maybe":           "--verbose: want true or false",
		"--env=a --env=b":                   "--env is given twice: it takes one string; give it once, or make its default a list to take several",
		"--env=a --replicas=1 --replicas=2": "--replicas is given twice",
		"--env=a --ratio=nan":               "--ratio: want a finite number such as 0.5 or 2, got \"nan\"",
		"--env=a --ratio=+Inf":              "--ratio: want a finite number",
		"--env=a --ratio=1e999":             `--ratio: "1e999" is out of range`,
	} {
		_, err := e.run(Options{}, script, strings.Fields(args)...)
		var ae *ArgsError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an argument error with %q", args, err, want)
		}
	}
}

func TestCancelStopsTheScript(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	h := e.host(Options{})
	started := make(chan struct{})
	go func() {
		<-started
		cancel()
	}()
	h.module = newModule(append(Builtins(), &Builtin{Name: "testing.started", Doc: "x", impl: func(*call) (star.Value, error) {
		close(started)
		return star.None, nil
	}}))
	err := h.Run(ctx, e.write("main.star", "podmin.testing.started()\nwhile True:\n    pass\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "interrupted: context canceled") {
		t.Fatalf("got %v", err)
	}
}

func TestSecretIsOpaqueAndScrubbed(t *testing.T) {
	e := newEnv(t)
	h := e.host(Options{})
	h.module = newModule(append(Builtins(), &Builtin{Name: "testing.secret", Doc: "x", impl: func(c *call) (star.Value, error) {
		return NewSecret(c.thread, "db-password", "hunter2"), nil
	}}))
	script := `
s = podmin.testing.secret()
print(s, str(s), type(s))
print("leak: hunter2!")
print(s == podmin.testing.secret())
`
	if err := h.Run(context.Background(), e.write("main.star", script), nil); err != nil {
		t.Fatal(err)
	}
	want := "<secret db-password> <secret db-password> secret\nleak: <secret db-password>!\nTrue\n"
	if e.stdout.String() != want {
		t.Fatalf("got %q, want %q", e.stdout.String(), want)
	}
	for script, want := range map[string]string{
		"{podmin.testing.secret(): 1}":                      "unhashable type: secret",
		"podmin.testing.secret().value":                     "secret has no .value field or method",
		"podmin.testing.secret() < podmin.testing.secret()": "secrets cannot be ordered",
	} {
		h := e.host(Options{})
		h.module = newModule(append(Builtins(), &Builtin{Name: "testing.secret", Doc: "x", impl: func(c *call) (star.Value, error) {
			return NewSecret(c.thread, "db-password", "hunter2"), nil
		}}))
		err := h.Run(context.Background(), e.write("bad.star", script+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", script, err, want)
		}
	}
}
