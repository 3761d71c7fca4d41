// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Text renders the reference for a terminal ("podmin help starlark"): the
// content of docs/starlark.md without its markup — no generator comment,
// headings underlined, code indented, parameters as aligned columns.
func Text() string {
	var b strings.Builder
	b.WriteString(underline("Podmin Starlark reference", '='))
	b.WriteString(Overview + "\n\n")
	b.WriteString(plainText(Safety))
	all := Builtins()
	sort.SliceStable(all, func(i, j int) bool { return groupOf(all[i]) < groupOf(all[j]) })
	group := ""
	for _, bi := range all {
		if g := groupOf(bi); g != group {
			group = g
			b.WriteString("\n" + underline(g, '-'))
		}
		fmt.Fprintf(&b, "\n%s\n\n", bi.Signature())
		for _, line := range strings.Split(bi.Doc, "\n") {
			b.WriteString(strings.TrimRight("  "+line, " ") + "\n")
		}
		if bi.Command != "" {
			fmt.Fprintf(&b, "\n  CLI: podmin %s.", bi.Command)
			if bi.Mutates {
				b.WriteString(" Under --dry-run its writes are recorded in the plan, not performed.")
			}
			b.WriteString("\n")
		}
		if len(bi.Params) > 0 {
			b.WriteString("\n")
			width := 0
			for _, p := range bi.Params {
				width = max(width, len(p.Name)+len(p.Type)+3)
			}
			for _, p := range bi.Params {
				req := ""
				if p.Required {
					req = " (required)"
				}
				col := p.Name + " (" + p.Type + ")"
				fmt.Fprintf(&b, "    %-*s  %s%s\n", width, col, p.Doc, req)
			}
		}
	}
	return b.String()
}

// groupOf is the module a builtin belongs to ("podmin" for the root's).
func groupOf(bi *Builtin) string {
	g, _, ok := strings.Cut(bi.Name, ".")
	if !ok {
		return "podmin"
	}
	return g
}

func underline(title string, c byte) string {
	return title + "\n" + strings.Repeat(string(c), len(title)) + "\n\n"
}

var heading = regexp.MustCompile("^(#{1,6}) (.*)$")

// plainText turns the Markdown of the hand-written sections into text:
// headings underlined, fenced code indented without its fences, inline
// code without its backticks.
func plainText(md string) string {
	var b strings.Builder
	code := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			code = !code
		case code:
			b.WriteString(strings.TrimRight("    "+line, " ") + "\n")
		case heading.MatchString(line):
			m := heading.FindStringSubmatch(line)
			c := byte('-')
			if len(m[1]) >= 3 {
				c = '.'
			}
			b.WriteString(strings.TrimSuffix(underline(strings.ReplaceAll(m[2], "`", ""), c), "\n"))
		default:
			b.WriteString(strings.ReplaceAll(line, "`", "") + "\n")
		}
	}
	return b.String()
}
