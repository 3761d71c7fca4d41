// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package scrub

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"weak"
)

// The scrubber replaces whole secret values, but an error about a value
// does not always quote the whole value: a parser splits an image
// reference into components, a validator names the one character it
// refuses. Quote and QuotePart are the one way an error quotes what a
// user typed or a file holds, and they refuse to quote anything that
// shares FragmentLen bytes with a secret value known to any registry of
// the process, and quote at most QuoteLimit bytes of anything else.

// FragmentLen is the length of the shortest run of a secret value's
// bytes that Quote refuses to show.
const FragmentLen = 4

// QuoteLimit bounds how many bytes of one input an error quotes; the rest
// is cut and its length said, so no error echoes a whole document.
const QuoteLimit = 200

// Withheld is what an error shows instead of input that shares bytes with
// a secret value.
const Withheld = "<input not shown: it contains part of a secret value>"

// registries are the live registries of the process. A registry holds
// values only in memory and tests create many, so they are held weakly.
var registries struct {
	mu   sync.Mutex
	list []weak.Pointer[Registry]
}

// track makes r known to Quote.
func track(r *Registry) {
	registries.mu.Lock()
	defer registries.mu.Unlock()
	live := registries.list[:0]
	for _, w := range registries.list {
		if w.Value() != nil {
			live = append(live, w)
		}
	}
	registries.list = append(live, weak.Make(r))
}

// liveRegistries returns the registries that still exist.
func liveRegistries() []*Registry {
	registries.mu.Lock()
	defer registries.mu.Unlock()
	out := make([]*Registry, 0, len(registries.list))
	for _, w := range registries.list {
		if r := w.Value(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// Quote renders input for an error message: Go-quoted, its registered
// secret values replaced, at most QuoteLimit bytes of it followed by how
// long it is, and Withheld when it still shares FragmentLen or more
// consecutive bytes with a registered value (a prefix of a secret, a
// component parsed out of one).
func Quote(input string) string {
	return QuotePart(input, input)
}

// QuotePart renders part, a piece of input (a component, one character)
// for an error message: Withheld when input as a whole shares
// FragmentLen bytes with a registered secret value, so no piece of such
// an input is shown, however short; otherwise part as Quote renders it.
func QuotePart(input, part string) string {
	regs := liveRegistries()
	if overlaps(regs, input) {
		// Whole values are replaced by their label, which says which
		// secret was given without showing any of it.
		masked := input
		for _, r := range regs {
			masked = r.String(masked)
		}
		if masked == input || overlaps(regs, masked) || part != input {
			return Withheld
		}
		part = masked
	}
	return bounded(part)
}

// bounded quotes at most QuoteLimit bytes of s, cut at a character
// boundary.
func bounded(s string) string {
	if len(s) <= QuoteLimit {
		return strconv.Quote(s)
	}
	cut := QuoteLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// overlaps reports whether s holds FragmentLen consecutive bytes of a
// value registered in one of regs.
func overlaps(regs []*Registry, s string) bool {
	if len(s) < FragmentLen {
		return false
	}
	for _, r := range regs {
		if r.sharesFragment(s) {
			return true
		}
	}
	return false
}

// sharesFragment reports whether s and one of r's values have a common
// substring of FragmentLen bytes.
func (r *Registry) sharesFragment(s string) bool {
	if r == nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, v := range r.values {
		if len(v) < FragmentLen {
			continue
		}
		for i := 0; i+FragmentLen <= len(s); i++ {
			if strings.Contains(v, s[i:i+FragmentLen]) {
				return true
			}
		}
	}
	return false
}

// QuoteRune renders one character of input ('x') for an error message,
// or Withheld when input shares FragmentLen bytes with a registered secret
// value: callers then name neither the character nor its position.
func QuoteRune(input string, r rune) string {
	if overlaps(liveRegistries(), input) {
		return Withheld
	}
	return strconv.QuoteRune(r)
}

// Showable reports whether Quote would show input whole and unchanged:
// it is within QuoteLimit and shares no FragmentLen bytes with a secret
// value. Only then may an error embed input, or a message a library
// wrote about it, as it is (a command to run, a parser's own words).
func Showable(input string) bool {
	return len(input) <= QuoteLimit && !overlaps(liveRegistries(), input)
}

// quotedSpan matches what a library's message quotes from its input:
// "double-quoted" (Go syntax), 'single-quoted' and `back-quoted` text.
var quotedSpan = regexp.MustCompile("`[^`]*`|\"(?:[^\"\\\\]|\\\\.)*\"|'[^']*'")

// QuoteSpans rewrites a message written by a library (a YAML or JSON
// parser, the flag package) so that every piece of input it quotes passes
// Quote: bounded, and withheld where it shares text with a secret value.
func QuoteSpans(msg string) string {
	return quotedSpan.ReplaceAllStringFunc(msg, func(span string) string {
		inner := span[1 : len(span)-1]
		if span[0] == '"' {
			if u, err := strconv.Unquote(span); err == nil {
				inner = u
			}
		}
		if span[0] == '\'' && utf8.RuneCountInString(inner) == 1 {
			// One character, as a parser names what it stopped at: the
			// input it came from is unknown here, so it is not shown.
			return "(a character not shown)"
		}
		return Quote(inner)
	})
}
