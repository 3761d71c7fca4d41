// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// buildContext is the set of context entries COPY can see.
type buildContext struct {
	dir     string
	entries map[string]fs.FileInfo // slash path relative to dir → info (Lstat)
	paths   []string               // sorted keys
}

// ignoreRule is one .dockerignore line.
type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// loadContext lists dir without the entries .dockerignore excludes.
func loadContext(dir string) (*buildContext, error) {
	rules, err := readIgnore(filepath.Join(dir, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	c := &buildContext{dir: dir, entries: map[string]fs.FileInfo{}}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignored(rules, rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		c.entries[rel] = info
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the build context %s: %w", dir, err)
	}
	for p := range c.entries {
		c.paths = append(c.paths, p)
	}
	sort.Strings(c.paths)
	return c, nil
}

func readIgnore(file string) ([]ignoreRule, error) {
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	var rules []ignoreRule
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if r.negate = strings.HasPrefix(line, "!"); r.negate {
			line = strings.TrimSpace(line[1:])
		}
		pat := strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(line)), "/")
		re, err := globRegexp(pat)
		if err != nil {
			return nil, fmt.Errorf("%s: pattern %q: %w", file, line, err)
		}
		r.re = re
		rules = append(rules, r)
	}
	return rules, nil
}

// globRegexp compiles a .dockerignore pattern: "**" crosses directories,
// "*" and "?" do not; a pattern also matches everything below a match.
func globRegexp(pat string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; {
		case c == '*' && i+1 < len(pat) && pat[i+1] == '*':
			b.WriteString(".*")
			i++
			if i+1 < len(pat) && pat[i+1] == '/' {
				i++
				b.WriteString("/?")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("(/.*)?$")
	return regexp.Compile(b.String())
}

// ignored applies the rules in order; the last match wins.
func ignored(rules []ignoreRule, rel string) bool {
	out := false
	for _, r := range rules {
		if r.re.MatchString(rel) {
			out = !r.negate
		}
	}
	return out
}

// match returns the context entries a COPY source names: one path, a glob,
// or "." for the whole context.
func (c *buildContext) match(src string) ([]string, error) {
	if src == "." {
		return []string{"."}, nil
	}
	if !strings.ContainsAny(src, "*?[") {
		if _, ok := c.entries[src]; ok {
			return []string{src}, nil
		}
		return nil, nil
	}
	if _, err := path.Match(src, ""); err != nil {
		return nil, fmt.Errorf("bad pattern %q: %w", src, err)
	}
	var out []string
	for _, p := range c.paths {
		if ok, _ := path.Match(src, p); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// below lists the entries inside directory dir ("." for all), sorted.
func (c *buildContext) below(dir string) []string {
	var out []string
	for _, p := range c.paths {
		if dir == "." || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}
