// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// schema is one documented JSON shape: an object with fields (each with
// an optional nested shape), or a list of a shape.
type schema struct {
	list   *schema
	fields map[string]*schema // nil value: a leaf
	order  []string
}

// parseSchema reads the README's notation: {a, b: {c}, d: [{e}]} or [{...}].
func parseSchema(s string) (*schema, string, bool) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "["):
		inner, rest, ok := parseSchema(s[1:])
		rest = strings.TrimSpace(rest)
		if !ok || !strings.HasPrefix(rest, "]") {
			return nil, "", false
		}
		return &schema{list: inner}, rest[1:], true
	case strings.HasPrefix(s, "{"):
		sc := &schema{fields: map[string]*schema{}}
		s = s[1:]
		for {
			s = strings.TrimSpace(s)
			m := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*`).FindString(s)
			if m == "" {
				return nil, "", false
			}
			s = strings.TrimSpace(s[len(m):])
			var sub *schema
			if strings.HasPrefix(s, ":") {
				var ok bool
				if sub, s, ok = parseSchema(s[1:]); !ok {
					return nil, "", false
				}
				s = strings.TrimSpace(s)
			}
			sc.fields[m], sc.order = sub, append(sc.order, m)
			switch {
			case strings.HasPrefix(s, ","):
				s = s[1:]
			case strings.HasPrefix(s, "}"):
				return sc, s[1:], true
			default:
				return nil, "", false
			}
		}
	}
	return nil, "", false
}

// mismatches compares a JSON value with a documented shape.
func (sc *schema) mismatches(path string, v any) []string {
	if sc.list != nil {
		l, ok := v.([]any)
		if !ok {
			return []string{path + ": not a list"}
		}
		var out []string
		for _, e := range l {
			out = append(out, sc.list.mismatches(path+"[]", e)...)
		}
		return out
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return []string{path + ": not an object"}
	}
	var keys []string
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	doc := slices.Sorted(func(yield func(string) bool) {
		for k := range sc.fields {
			if !yield(k) {
				return
			}
		}
	})
	var out []string
	if !slices.Equal(keys, doc) {
		out = append(out, path+": fields "+strings.Join(keys, ",")+", documented "+strings.Join(doc, ","))
	}
	for k, sub := range sc.fields {
		if sub != nil && obj[k] != nil {
			out = append(out, sub.mismatches(path+"."+k, obj[k])...)
		}
	}
	return out
}

// TestREADMEDocumentsTheJSONSchemas checks the README's table of output
// formats against the golden output of each command: the documented
// fields are exactly the fields printed.
func TestREADMEDocumentsTheJSONSchemas(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "### Output formats")
	if !ok {
		t.Fatal("README has no Output formats section")
	}
	section, _, _ = strings.Cut(section, "\n#")
	golden := map[string][]string{
		"connect": {"connect"}, "use": {"use-list"}, "use CLUSTER": {"use"}, "init": {"init"},
		"validate": {"validate"}, "deploy": {"deploy", "deploy-service"}, "list": {"list"}, "status": {"status"},
		"delete": {"delete", "delete-absent"}, "preview": {"preview"}, "build": {"build"}, "pull": {"pull"},
		"push": {"push"}, "secret create": {"secret-create"}, "update": {"secret-update"},
		"delete (secret)": {"secret-delete"}, "restore": {"secret-restore"}, "destroy (secret)": {"secret-destroy"},
		"secret list": {"secret-list", "secret-list-scheduled"}, "version": {"version"},
		"setup": {"setup"}, "teardown": {"teardown"}, "destroy": {"destroy"},
	}
	// install, uninstall (cloudflared) and fetch
	golden["install cloudflared"] = []string{"install-cloudflared", "install-cloudflared-unchanged"}
	golden["uninstall cloudflared"] = []string{"uninstall-cloudflared", "uninstall-cloudflared-absent"}
	golden["fetch"] = []string{"fetch"}
	golden["index rebuild"] = []string{"index-rebuild"}
	row := regexp.MustCompile("(?m)^\\| (`[^|]+) \\| `([^`]+)`")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		sc, rest, ok := parseSchema(m[2])
		if !ok || strings.TrimSpace(rest) != "" {
			t.Errorf("README: cannot read the schema %q", m[2])
			continue
		}
		secretRow := strings.HasPrefix(m[1], "`secret create`")
		for _, name := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(m[1], -1) {
			key := name[1]
			if secretRow && (key == "delete" || key == "destroy") {
				key += " (secret)"
			}
			files, ok := golden[key]
			if !ok {
				continue // run --dry-run: the plan has its own tests
			}
			seen[key] = true
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join("testdata", "golden", f+".json"))
				if err != nil {
					t.Fatal(err)
				}
				var v any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				for _, p := range sc.mismatches(f, v) {
					t.Errorf("README row %s: %s", key, p)
				}
			}
		}
	}
	for key := range golden {
		if !seen[key] {
			t.Errorf("README documents no JSON schema for %s", key)
		}
	}
}
