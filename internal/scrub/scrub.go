// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package scrub

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// MinLen is the shortest value, in bytes, that is scrubbed; it applies to
// the value and to each of its encoded forms.
const MinLen = 6

// Redacted is what replaces a value registered under label.
func Redacted(label string) string {
	if label == "" {
		return "<secret>"
	}
	return "<secret " + label + ">"
}

// Registry holds the secret values of one process. The zero value is not
// usable; call New. A nil *Registry scrubs nothing, so code that may run
// without one need not check.
type Registry struct {
	mu       sync.RWMutex
	patterns map[string]string // pattern (value or an encoding) → label
	values   []string          // the values as registered, for QuotePart
	rep      *strings.Replacer // nil until needed after a change
	sorted   []string          // patterns, longest first
	fails    [][]int           // KMP failure function of each sorted pattern
}

// New returns an empty Registry.
func New() *Registry {
	r := &Registry{patterns: map[string]string{}}
	track(r)
	return r
}

// Add registers value under label (the secret's key, shown in its place).
// A value already registered keeps its first label.
func (r *Registry) Add(label string, value []byte) {
	if r == nil || len(value) < MinLen {
		return
	}
	forms := Encodings(value)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, known := r.patterns[string(value)]; !known {
		r.values = append(r.values, string(value))
	}
	changed := false
	for _, f := range forms {
		if _, ok := r.patterns[f]; !ok {
			r.patterns[f] = label
			changed = true
		}
	}
	if changed {
		r.rep, r.sorted, r.fails = nil, nil, nil
	}
}

// AddString registers a string value.
func (r *Registry) AddString(label, value string) { r.Add(label, []byte(value)) }

// Len reports how many patterns (values and encodings) are registered.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.patterns)
}

// Encodings returns value and the forms it commonly takes in output, each
// at least MinLen long: the value itself, without surrounding white space,
// each of its lines, JSON and Go quoted forms (without the quotes), hex,
// URL-escaped, and base64 (standard and URL alphabets) at each of the three
// byte alignments it can have inside a longer encoded text.
func Encodings(value []byte) []string {
	set := map[string]bool{}
	add := func(s string) {
		if len(s) >= MinLen {
			set[s] = true
		}
	}
	v := string(value)
	for _, s := range []string{v, strings.TrimSpace(v)} {
		add(s)
		if j, err := json.Marshal(s); err == nil {
			add(string(j[1 : len(j)-1]))
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(s) == nil {
			j := strings.TrimSuffix(b.String(), "\n")
			add(j[1 : len(j)-1])
		}
		q := strconv.Quote(s)
		add(q[1 : len(q)-1])
		q = strconv.QuoteToASCII(s)
		add(q[1 : len(q)-1])
		add(hex.EncodeToString([]byte(s)))
		add(strings.ToUpper(hex.EncodeToString([]byte(s))))
		add(url.QueryEscape(s))
		add(url.PathEscape(s))
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for _, c := range base64Cores(enc, []byte(s)) {
				add(c)
			}
		}
	}
	if strings.Contains(v, "\n") {
		for _, line := range strings.Split(v, "\n") {
			add(strings.TrimSpace(line))
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// base64Cores returns, for each alignment of value inside a longer byte
// string (0, 1 or 2 bytes before it in its 3-byte group), the characters of
// its base64 encoding that depend on value's bytes alone. Whatever precedes
// or follows it, an encoding of a text that contains value holds one of
// them. The full padded encoding is included for the value on its own.
func base64Cores(enc *base64.Encoding, value []byte) []string {
	out := []string{enc.EncodeToString(value), enc.WithPadding(base64.NoPadding).EncodeToString(value)}
	for lead := 0; lead < 3; lead++ {
		// Skip the partial group at the start: its first character mixes
		// in unknown bytes when lead > 0.
		skip := (3 - lead) % 3
		if skip >= len(value) {
			continue
		}
		rest := value[skip:]
		full := len(rest) / 3 * 3
		if full == 0 {
			continue
		}
		out = append(out, enc.EncodeToString(rest[:full]))
	}
	return out
}

// replacer returns the replacer, the patterns longest first (so a value
// that contains another is replaced whole) and their failure functions,
// all from one consistent state.
func (r *Registry) replacer() (*strings.Replacer, []string, [][]int) {
	r.mu.RLock()
	rep, sorted, fails := r.rep, r.sorted, r.fails
	r.mu.RUnlock()
	if rep != nil {
		return rep, sorted, fails
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rep != nil {
		return r.rep, r.sorted, r.fails
	}
	sorted = make([]string, 0, len(r.patterns))
	for p := range r.patterns {
		sorted = append(sorted, p)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if len(sorted[i]) != len(sorted[j]) {
			return len(sorted[i]) > len(sorted[j])
		}
		return sorted[i] < sorted[j]
	})
	pairs := make([]string, 0, 2*len(sorted))
	for _, p := range sorted {
		pairs = append(pairs, p, Redacted(r.patterns[p]))
	}
	r.fails = make([][]int, len(sorted))
	for i, p := range sorted {
		r.fails[i] = failure(p)
	}
	r.rep, r.sorted = strings.NewReplacer(pairs...), sorted
	return r.rep, r.sorted, r.fails
}

// String replaces every registered value and encoding in s.
func (r *Registry) String(s string) string {
	if r == nil || r.Len() == 0 {
		return s
	}
	rep, _, _ := r.replacer()
	return rep.Replace(s)
}

// Contains reports whether s holds a registered value or encoding.
func (r *Registry) Contains(s string) bool {
	if r == nil || r.Len() == 0 {
		return false
	}
	_, sorted, _ := r.replacer()
	for _, p := range sorted {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// pendingPrefix returns the length of the longest suffix of s that is a
// proper prefix of a registered pattern: bytes a writer must hold back
// because the next write may complete a value. It runs each pattern's
// Knuth-Morris-Pratt automaton over the tail of s, so it costs time linear
// in the text, however long the values are.
func (r *Registry) pendingPrefix(s string) int {
	_, sorted, fails := r.replacer()
	best := 0
	for i, p := range sorted {
		if len(p)-1 <= best {
			break // sorted longest first: no shorter pattern can beat best
		}
		tail := s[max(0, len(s)-(len(p)-1)):]
		if k := kmpState(p, fails[i], tail); k > best {
			best = k
		}
	}
	return best
}

// failure computes the Knuth-Morris-Pratt failure function of p.
func failure(p string) []int {
	f := make([]int, len(p))
	k := 0
	for i := 1; i < len(p); i++ {
		for k > 0 && p[i] != p[k] {
			k = f[k-1]
		}
		if p[i] == p[k] {
			k++
		}
		f[i] = k
	}
	return f
}

// kmpState returns the length of the longest prefix of p that is a suffix
// of text, below len(p).
func kmpState(p string, f []int, text string) int {
	k := 0
	for i := 0; i < len(text); i++ {
		for k > 0 && (k == len(p) || text[i] != p[k]) {
			k = f[k-1]
		}
		if text[i] == p[k] {
			k++
		}
	}
	if k == len(p) {
		k = f[k-1]
	}
	return k
}

// Error wraps err so that its message is scrubbed; errors.Is and errors.As
// still see err.
func (r *Registry) Error(err error) error {
	if err == nil || r == nil {
		return err
	}
	if s, ok := err.(*scrubbed); ok && s.r == r {
		return err
	}
	return &scrubbed{r: r, err: err}
}

type scrubbed struct {
	r   *Registry
	err error
}

func (s *scrubbed) Error() string { return s.r.String(s.err.Error()) }
func (s *scrubbed) Unwrap() error { return s.err }

var (
	processOnce sync.Once
	process     *Registry
)

// Process returns the registry of this process. A secret must be scrubbed
// from everything the process prints, including output written by code
// that never saw the secret (another recipe's test report, a progress
// line, a panic), so the command-line program uses one registry for its
// whole life. Tests that need isolation create their own with New.
func Process() *Registry {
	processOnce.Do(func() { process = New() })
	return process
}

// RegistryOf returns the registry of the outermost error in err's chain
// that Registry.Error wrapped, or nil.
func RegistryOf(err error) *Registry {
	for err != nil {
		if s, ok := err.(*scrubbed); ok {
			return s.r
		}
		err = errors.Unwrap(err)
	}
	return nil
}
