// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"podmin.dev/podmin/builtins"
)

// allCommands lists every command a user can reach, runnable or not.
func allCommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || strings.HasPrefix(c.Name(), "__") {
			return
		}
		out = append(out, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// shellWords splits one shell command line into words, honouring single
// and double quotes. Operators (|, ;, &&, >, <) end the command.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote, inWord = ch, true
		case ch == ' ' || ch == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case strings.ContainsRune("|;&><", rune(ch)):
			if inWord {
				words = append(words, cur.String())
			}
			return words
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

var substitution = regexp.MustCompile(`[$<]\((podmin [^)]*)\)`)

// exampleCommands returns the podmin invocations of an Example text: the
// podmin command of each line (continued with a backslash; in a pipeline
// or list, its podmin part) and every $(podmin ...) inside it, as
// argument lists. A line without a podmin command yields nil.
func exampleCommands(example string) [][]string {
	var out [][]string
	example = strings.ReplaceAll(example, "\\\n", " ")
	for _, line := range strings.Split(example, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		subs := substitution.FindAllStringSubmatch(line, -1)
		for _, m := range subs {
			out = append(out, shellWords(m[1])[1:])
		}
		line = substitution.ReplaceAllString(line, "registry.podmin.internal/apps/substituted:v1") // what podmin push prints
		var found []string
		for _, part := range regexp.MustCompile(`\|\||&&|[|;]`).Split(line, -1) {
			if w := shellWords(strings.TrimSpace(part)); len(w) > 0 && w[0] == "podmin" {
				found = w[1:]
				break
			}
		}
		if found != nil || len(subs) == 0 {
			out = append(out, found)
		}
	}
	return out
}

// checkInvocation parses args against a fresh command tree the way
// Execute would, without running anything, and returns the command found.
func checkInvocation(args []string) (*cobra.Command, error) {
	root := newRoot(&builtins.Env{})
	cmd, rest, err := root.Find(args)
	if err != nil {
		return nil, err
	}
	if cmd.DisableFlagParsing {
		return cmd, nil
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return cmd, err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return cmd, err
	}
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return cmd, err
	}
	return cmd, cmd.ValidateFlagGroups()
}

// TestEveryCommandHasRunnableExamples walks the command tree: every
// command has an Examples section, and every example parses into the
// command it illustrates with flags and arguments the command accepts.
func TestEveryCommandHasRunnableExamples(t *testing.T) {
	for _, c := range allCommands(newRoot(&builtins.Env{})) {
		path := c.CommandPath()
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Examples", path)
			continue
		}
		own := false
		for _, args := range exampleCommands(c.Example) {
			if len(args) == 0 {
				t.Errorf("%s: an example line is not a podmin command:\n%s", path, c.Example)
				continue
			}
			got, err := checkInvocation(args)
			if err != nil {
				t.Errorf("%s: example %q does not parse: %v", path, "podmin "+strings.Join(args, " "), err)
				continue
			}
			// A group's examples call its subcommands; a help topic's
			// example is "podmin help TOPIC".
			gp := got.CommandPath()
			if gp == path || strings.HasPrefix(gp, path+" ") ||
				(gp == "podmin help" && "podmin "+strings.Join(args[1:], " ") == path) {
				own = true
			}
		}
		if !own {
			t.Errorf("%s: no example calls %s itself:\n%s", path, path, c.Example)
		}
	}
}

// listedValues finds "-o a|b|c" and "--output a|b|c" in help text.
var listedValues = regexp.MustCompile(`(?:^|[\s\[(])(-[a-zA-Z]|--[a-z][a-z-]*)[ =]([a-z0-9-]+(?:\|[a-z0-9-]+)+)`)

// TestHelpListsWhatFlagsAccept checks help text against the flags: a
// value listed for a flag ("-o table|json") must be accepted, and every
// enumerated flag's help and the synopsis name all of its values.
func TestHelpListsWhatFlagsAccept(t *testing.T) {
	for _, c := range allCommands(newRoot(&builtins.Env{})) {
		for _, p := range helpValueProblems(c) {
			t.Error(p)
		}
	}
}

// TestHelpValueCheckBites shows the check above finding both mistakes of
// the past: a synopsis listing too few -o values, and one listing a value
// the flag refuses.
func TestHelpValueCheckBites(t *testing.T) {
	var out string
	few := &cobra.Command{Use: "run FILE [-o table|json]"}
	addOutputFlag(few, &out)
	if p := helpValueProblems(few); len(p) != 1 || !strings.Contains(p[0], `not the accepted "yaml"`) {
		t.Errorf("too few values: %q", p)
	}
	wrong := &cobra.Command{Use: "list [-o table|json|yaml|xml]"}
	addOutputFlag(wrong, &out)
	if p := helpValueProblems(wrong); len(p) != 1 || !strings.Contains(p[0], "-o xml, which it refuses") {
		t.Errorf("a refused value: %q", p)
	}
}

func helpValueProblems(c *cobra.Command) []string {
	var problems []string
	path := c.CommandPath()
	c.Flags().VisitAll(func(f *pflag.Flag) {
		e, ok := f.Value.(interface{ Allowed() []string })
		if !ok {
			return
		}
		for _, v := range e.Allowed() {
			if !strings.Contains(f.Usage, v) {
				problems = append(problems, fmt.Sprintf("%s --%s: its help %q does not name the accepted value %q", path, f.Name, f.Usage, v))
			}
		}
	})
	for i, text := range []string{c.Use, c.Long, c.Example} {
		for _, m := range listedValues.FindAllStringSubmatch(text, -1) {
			name := strings.TrimLeft(m[1], "-")
			f := c.Flags().Lookup(name)
			if len(name) == 1 {
				f = c.Flags().ShorthandLookup(name)
			}
			if f == nil {
				problems = append(problems, fmt.Sprintf("%s: help lists values for %s, which it does not have", path, m[1]))
				continue
			}
			listed := strings.Split(m[2], "|")
			def := f.Value.String()
			for _, v := range listed {
				if err := f.Value.Set(v); err != nil {
					problems = append(problems, fmt.Sprintf("%s: help lists %s %s, which it refuses: %v", path, m[1], v, err))
				}
			}
			_ = f.Value.Set(def)
			// The synopsis lists all of them; prose may name a few.
			if e, ok := f.Value.(interface{ Allowed() []string }); ok && i == 0 {
				for _, v := range e.Allowed() {
					if !slices.Contains(listed, v) {
						problems = append(problems, fmt.Sprintf("%s: help lists %s %s but not the accepted %q", path, m[1], m[2], v))
					}
				}
			}
		}
	}
	return problems
}

// TestCompletionScripts generates the completion script of each shell the
// README documents; bash's is also checked by bash itself when present.
func TestCompletionScripts(t *testing.T) {
	c := newCLI(t)
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		out := c.ok("completion", sh)
		if !strings.Contains(out, "podmin") || len(out) < 500 {
			t.Errorf("completion %s wrote %d bytes:\n%.300s", sh, len(out), out)
		}
		if sh != "bash" {
			continue
		}
		bash, err := exec.LookPath("bash")
		if err != nil {
			continue
		}
		check := exec.Command(bash, "-n")
		check.Stdin = strings.NewReader(out)
		if b, err := check.CombinedOutput(); err != nil {
			t.Errorf("bash -n on the bash completion: %v\n%s", err, b)
		}
	}
}

// TestInitThenDeployExamplesRun runs the first example of "podmin init"
// and then every example of "podmin deploy" in one directory, for real:
// one follows the other, so the names they use must agree.
func TestInitThenDeployExamplesRun(t *testing.T) {
	c := newCLI(t)
	work := filepath.Join(c.root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	c.adjust = func(e *builtins.Env) { e.WorkDir = work }
	c.connectLocal()
	root := newRoot(&builtins.Env{})
	find := func(name string) *cobra.Command {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	initExamples := exampleCommands(find("init").Example)
	c.ok(initExamples[0]...)
	// A wait is answered by a fake leader that reports each committed
	// revision ready, as agents with kubelets would.
	stop := newFakeLeaderAt(t, filepath.Join(c.root, "bucket")).follow()
	defer stop()
	for _, args := range exampleCommands(find("deploy").Example) {
		c.ok(args...)
	}
}
