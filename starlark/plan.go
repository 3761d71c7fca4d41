// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins/dryrun"
)

// Plan is what a dry run would have changed, per builtin call, rendered
// from the writes the recording boundaries saw. The host adds nothing of
// its own: a call's changes are exactly the net writes it made.
type Plan struct {
	mu    sync.Mutex
	steps []Step
}

// Step is one builtin call and its net changes.
type Step struct {
	// Call is the builtin and its subject: podmin.deployments.deploy("web").
	Call string `json:"call"`
	// Position is the calling line, file:line:col.
	Position string `json:"position,omitempty"`
	// Destructive marks a call that deletes or destroys something.
	Destructive bool `json:"destructive"`
	// NeedsConfirmation marks a destructive call the script did not
	// confirm: a real run needs confirm = in the script or podmin run -y.
	NeedsConfirmation bool `json:"needsConfirmation"`
	// Changes are empty when the call would change nothing.
	Changes []PlanChange `json:"changes"`
}

// PlanChange is one changed thing and what it was and becomes.
type PlanChange struct {
	// Kind is object, bucket, secret, contexts, file, directory or image.
	Kind string `json:"kind"`
	// Where holds it: a bucket, a secrets provider, a directory.
	Where string `json:"where"`
	// Target names it: an object key, a secret name, a path.
	Target string `json:"target"`
	// Action is created, updated, deleted, destroyed,
	// scheduled-for-deletion or restored.
	Action string `json:"action"`
	// Diff shows the content change: JSON field by field, text as a
	// unified diff, binary content by size. Secrets have none.
	Diff []string `json:"diff,omitempty"`
}

func (p *Plan) add(s Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps = append(p.steps, s)
}

// Steps returns the planned calls in the order the script made them.
func (p *Plan) Steps() []Step {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Step(nil), p.steps...)
}

// Changes returns every change of every step, in order.
func (p *Plan) Changes() []PlanChange {
	var out []PlanChange
	for _, s := range p.Steps() {
		out = append(out, s.Changes...)
	}
	return out
}

// newStep describes a finished builtin call. read returns an object's
// content as the dry run sees it.
func newStep(thread *star.Thread, b *Builtin, args star.Tuple, changes []dryrun.Change, read func(where, key string) ([]byte, bool)) Step {
	var subject star.Value
	if len(args) > 0 {
		subject = args[0]
	}
	s := planStep(b, subject, changes, read)
	if thread.CallStackDepth() > 1 {
		s.Position = thread.CallFrame(1).Pos.String()
	}
	return s
}

// planStep is the step of one call of b with its subject (nil without
// one) that made changes; a recipe's dry run and a command's --dry-run
// describe a call alike.
func planStep(b *Builtin, subject star.Value, changes []dryrun.Change, read func(where, key string) ([]byte, bool)) Step {
	call := b.FullName() + "()"
	if subject != nil {
		call = b.FullName() + "(" + subject.String() + ")"
	}
	s := Step{Call: call, Changes: []PlanChange{}, Destructive: b.Destructive}
	for _, c := range changes {
		s.Changes = append(s.Changes, PlanChange{Kind: c.Kind, Where: c.Where, Target: c.Target, Action: c.Action, Diff: diff(c)})
	}
	diffReplacedPayloads(s.Changes, changes, read)
	return s
}

// diffReplacedPayloads shows a new content-addressed payload as a diff
// against the payload it replaces: when a JSON document of the same call
// (deployments/index.json) swaps a reference from one object key to a key
// this call created, the created object's diff is taken against the old
// object instead of against nothing.
func diffReplacedPayloads(out []PlanChange, changes []dryrun.Change, read func(where, key string) ([]byte, bool)) {
	created := map[string]int{}
	for i, c := range changes {
		if c.Kind == dryrun.KindObject && c.Action == dryrun.Created {
			created[c.Where+"\x00"+c.Target] = i
		}
	}
	for _, c := range changes {
		if c.Kind != dryrun.KindObject || !isJSON(c.Before) || !isJSON(c.After) {
			continue
		}
		before, after := flatten(c.Before), flatten(c.After)
		for path, nv := range after {
			ov, ok := before[path]
			if !ok || ov == nv {
				continue
			}
			var oldKey, newKey string
			if json.Unmarshal([]byte(ov), &oldKey) != nil || json.Unmarshal([]byte(nv), &newKey) != nil {
				continue
			}
			i, ok := created[c.Where+"\x00"+newKey]
			if !ok || read == nil {
				continue
			}
			old, ok := read(c.Where, oldKey)
			if !ok || !isText(old) || !isText(changes[i].After) {
				continue
			}
			lines := append([]string{"(compared with " + oldKey + ")"}, textDiff(string(old), string(changes[i].After))...)
			if len(lines) > maxDiffLines {
				lines = append(lines[:maxDiffLines], fmt.Sprintf("... %d more line(s)", len(lines)-maxDiffLines))
			}
			out[i].Diff = lines
		}
	}
}

// Write prints the plan as text (the default) or as JSON.
func (p *Plan) Write(w io.Writer, format string) error {
	steps := p.Steps()
	if steps == nil {
		steps = []Step{}
	}
	if format == "json" {
		b, err := json.MarshalIndent(struct {
			DryRun bool   `json:"dryRun"`
			Steps  []Step `json:"steps"`
		}{true, steps}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	n, destructive := 0, 0
	for _, s := range steps {
		n += len(s.Changes)
		if s.Destructive {
			destructive++
		}
	}
	var buf bytes.Buffer
	if n == 0 {
		fmt.Fprint(&buf, "dry run: no changes")
	} else {
		fmt.Fprintf(&buf, "dry run: %d change(s) in %d call(s)", n, len(steps))
	}
	if destructive > 0 {
		fmt.Fprintf(&buf, ", %d destructive call(s)", destructive)
	}
	fmt.Fprintln(&buf, "; nothing was written")
	for _, s := range steps {
		fmt.Fprintf(&buf, "\n%s", s.Call)
		if s.Position != "" {
			fmt.Fprintf(&buf, "  at %s", s.Position)
		}
		if s.Destructive {
			fmt.Fprint(&buf, "  [destructive]")
		}
		fmt.Fprintln(&buf)
		if s.NeedsConfirmation {
			fmt.Fprintln(&buf, "  not confirmed by the script: a real run needs confirm = in the call or podmin run --yes (-y)")
		}
		if len(s.Changes) == 0 {
			fmt.Fprintln(&buf, "  unchanged")
		}
		for _, c := range s.Changes {
			fmt.Fprintf(&buf, "  %-9s %s %s  (%s)\n", c.Action, c.Kind, c.Target, c.Where)
			for _, l := range c.Diff {
				fmt.Fprintf(&buf, "      %s\n", l)
			}
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// maxDiffLines bounds one change's diff in the plan.
const maxDiffLines = 200

// diff renders what a change did to its content.
func diff(c dryrun.Change) []string {
	if c.Kind == dryrun.KindSecret || c.Kind == dryrun.KindDir || (c.Before == nil && c.After == nil) {
		return nil
	}
	var lines []string
	switch {
	case isJSON(c.Before) && isJSON(c.After):
		lines = jsonDiff(c.Before, c.After)
	case isText(c.Before) && isText(c.After):
		lines = textDiff(string(c.Before), string(c.After))
	default:
		lines = []string{fmt.Sprintf("%d bytes -> %d bytes (binary)", len(c.Before), len(c.After))}
	}
	if len(lines) > maxDiffLines {
		lines = append(lines[:maxDiffLines], fmt.Sprintf("... %d more line(s)", len(lines)-maxDiffLines))
	}
	return lines
}

func isText(b []byte) bool { return utf8.Valid(b) && !bytes.ContainsRune(b, 0) }

func isJSON(b []byte) bool {
	if len(b) == 0 {
		return true // absent
	}
	t := bytes.TrimSpace(b)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t)
}

// jsonDiff compares two JSON documents field by field.
func jsonDiff(before, after []byte) []string {
	a, b := flatten(before), flatten(after)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []string
	for _, k := range sorted {
		va, ina := a[k]
		vb, inb := b[k]
		if k == "" {
			k = "(the whole document)" // an empty object or list at the top
		}
		switch {
		case ina && !inb:
			out = append(out, "- "+k+": "+va)
		case !ina && inb:
			out = append(out, "+ "+k+": "+vb)
		case va != vb:
			out = append(out, "~ "+k+": "+va+" -> "+vb)
		}
	}
	return out
}

// flatten maps each leaf of a JSON document to its compact JSON value,
// keyed by its dotted path.
func flatten(data []byte) map[string]string {
	out := map[string]string{}
	if len(data) == 0 {
		return out
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return out
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				out[path] = "{}"
			}
			for k, e := range x {
				walk(join(path, k), e)
			}
		case []any:
			if len(x) == 0 {
				out[path] = "[]"
			}
			ids, keyed := elementIDs(x)
			for i, e := range x {
				if keyed {
					walk(fmt.Sprintf("%s[revision=%s]", path, ids[i]), e)
					continue
				}
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		default:
			b, _ := json.Marshal(x)
			out[path] = string(b)
		}
	}
	walk("", v)
	return out
}

// elementIDs names the elements of a list of objects that each carry a
// distinct scalar "revision" (an index entry's revisions) by it, so a
// revision prepended to the list shows as one added element instead of
// every element shifting one place.
func elementIDs(list []any) ([]string, bool) {
	ids := make([]string, len(list))
	seen := map[string]bool{}
	for i, e := range list {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := obj["revision"].(float64)
		if !ok {
			return nil, false
		}
		id := fmt.Sprint(n)
		if seen[id] {
			return nil, false
		}
		seen[id], ids[i] = true, id
	}
	return ids, len(list) > 0
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// maxLCSCells bounds the line diff's table; larger inputs are shown as
// removed and added whole.
const maxLCSCells = 4 << 20

// textDiff is a unified line diff: "-" removed, "+" added, " " kept lines
// near a change.
func textDiff(before, after string) []string {
	a, b := splitLines(before), splitLines(after)
	if len(a)*len(b) > maxLCSCells {
		var out []string
		for _, l := range a {
			out = append(out, "-"+l)
		}
		for _, l := range b {
			out = append(out, "+"+l)
		}
		return out
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, " "+a[i])
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "-"+a[i])
			i++
		default:
			out = append(out, "+"+b[j])
			j++
		}
	}
	return trimContext(out)
}

// diffContext is how many unchanged lines are kept around a change.
const diffContext = 3

// trimContext drops unchanged lines further than diffContext from any
// change, marking each gap with "...".
func trimContext(lines []string) []string {
	keep := make([]bool, len(lines))
	for i, l := range lines {
		if l[0] == ' ' {
			continue
		}
		for k := max(0, i-diffContext); k <= min(len(lines)-1, i+diffContext); k++ {
			keep[k] = true
		}
	}
	var out []string
	gap := false
	for i, l := range lines {
		if !keep[i] {
			gap = true
			continue
		}
		if gap {
			out = append(out, "...")
			gap = false
		}
		out = append(out, l)
	}
	if gap {
		out = append(out, "...")
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
