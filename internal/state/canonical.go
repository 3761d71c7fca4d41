// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"sort"
	"strings"
)

// Every Podmin writer stores the index in Encode's form, so a reader almost
// always holds canonical bytes. Those are decoded by a scanner that checks
// the exact form and the same rules as the general decoder (decodeIndex),
// and the index keeps them: Encode then copies the unchanged entries' bytes
// and encodes only the ones Set or Remove touched, instead of re-encoding
// every entry. Bytes that are not canonical, or break any rule, go to the
// general decoder, which gives the error, so both paths accept exactly the
// same indexes with the same meaning (FuzzCanonicalDecode checks it, and
// FuzzIncrementalEncode checks that the spliced encoding equals the full
// one).

// rawIndex is the canonical encoding an Index was decoded from.
type rawIndex struct {
	// text is the encoding; keys and spans index into it.
	text string
	// keys are the entries' "<nodegroup>/<name>" in ascending byte order,
	// and parsed the same keys.
	keys   []string
	parsed []Key
	// spans are the byte ranges of each entry's member, from the two
	// spaces before its key to its closing brace, without the separator.
	spans [][2]int
}

// appendMember appends the canonical text of one entry, without its
// separator. Its revisions, when it records any, follow on one line.
func appendMember(b []byte, key string, e Entry, revs []Revision) []byte {
	b = append(b, `  "`...)
	b = append(b, key...)
	b = append(b, "\": {\n    \"pod\": \""...)
	b = append(b, e.Pod...)
	if e.Service != "" {
		b = append(b, "\",\n    \"service\": \""...)
		b = append(b, e.Service...)
	}
	if len(revs) > 0 {
		b = append(b, "\",\n    \"revisions\": "...)
		b = append(b, encodeRevisions(revs)...)
		return append(b, "\n  }"...)
	}
	return append(b, "\"\n  }"...)
}

// decodeCanonical decodes data when it is exactly Encode's form of a valid
// index; otherwise it reports false and the caller decodes with
// decodeIndex, which explains what is wrong.
func decodeCanonical(data []byte) (*Index, bool) {
	if string(data) == "{}\n" {
		ix := NewIndex()
		ix.raw = &rawIndex{text: "{}\n"}
		return ix, true
	}
	s := string(data)
	sc := scanner{s: s}
	if !sc.lit("{\n") {
		return nil, false
	}
	// Every member of canonical text spans three or four lines: sizing the
	// tables for a third of the lines up front saves growing them entry by
	// entry (counting one byte is much cheaper than counting a phrase).
	n := strings.Count(s, "\n") / 3
	services := n / 2
	ix := &Index{entries: make(map[Key]Entry, n), services: make(map[ServiceID]Key, services)}
	raw := &rawIndex{text: s, keys: make([]string, 0, n), parsed: make([]Key, 0, n), spans: make([][2]int, 0, n)}
	var v canonicalRules
	for {
		start := sc.i
		if !sc.lit(`  "`) {
			return nil, false
		}
		key, ok := sc.str()
		if !ok || len(raw.keys) > 0 && key <= raw.keys[len(raw.keys)-1] || !sc.lit("\": {\n    \"pod\": \"") {
			return nil, false
		}
		var e Entry
		if e.Pod, ok = sc.str(); !ok {
			return nil, false
		}
		if sc.lit("\",\n    \"service\": \"") {
			if e.Service, ok = sc.str(); !ok {
				return nil, false
			}
		}
		var revsLine string
		if sc.lit("\",\n    \"revisions\": ") {
			if revsLine, ok = sc.line(); !ok || !sc.lit("\n  }") {
				return nil, false
			}
		} else if !sc.lit("\"\n  }") {
			return nil, false
		}
		k, ok := v.key(key)
		if !ok || !canonicalPodPath(e.Pod, k.NodeGroup) {
			return nil, false
		}
		if revsLine != "" {
			revs, ok := canonicalRevisions(k, revsLine)
			if !ok {
				return nil, false
			}
			if ix.history == nil {
				ix.history = map[Key][]Revision{}
			}
			ix.history[k] = revs
		}
		if e.Service != "" {
			id, ok := canonicalServicePath(e.Service)
			if !ok {
				return nil, false
			}
			if _, taken := ix.services[id]; taken {
				return nil, false
			}
			ix.services[id] = k
		}
		ix.entries[k] = e
		raw.keys = append(raw.keys, key)
		raw.parsed = append(raw.parsed, k)
		raw.spans = append(raw.spans, [2]int{start, sc.i})
		if sc.lit(",\n") {
			continue
		}
		if sc.lit("\n}\n") && sc.i == len(s) {
			break
		}
		return nil, false
	}
	ix.raw = raw
	return ix, true
}

// scanner walks canonical index text.
type scanner struct {
	s string
	i int
}

// lit consumes lit when the text continues with it.
func (sc *scanner) lit(lit string) bool {
	if strings.HasPrefix(sc.s[sc.i:], lit) {
		sc.i += len(lit)
		return true
	}
	return false
}

// line consumes the rest of the line, up to (not including) its newline.
func (sc *scanner) line() (string, bool) {
	rest := sc.s[sc.i:]
	end := strings.IndexByte(rest, '\n')
	if end <= 0 {
		return "", false
	}
	sc.i += end
	return rest[:end], true
}

// str consumes a string body up to (not including) its closing quote. Only
// the characters keys and paths are made of are accepted, so no string
// needs escaping and the text is its own value.
func (sc *scanner) str() (string, bool) {
	rest := sc.s[sc.i:]
	end := strings.IndexByte(rest, '"')
	if end <= 0 {
		return "", false
	}
	v := rest[:end]
	for i := 0; i < len(v); i++ {
		if !pathChar[v[i]] {
			return "", false
		}
	}
	sc.i += end
	return v, true
}

// pathChar marks the characters of keys and payload paths: lowercase
// letters, digits, '-', '.' and '/'.
var pathChar = func() (t [256]bool) {
	for c := range t {
		t[c] = isAlnum(byte(c)) || c == '-' || c == '.' || c == '/'
	}
	return t
}()

// canonicalRules checks the entries of canonical text with the rules of
// ParseKey and Entry.validate, without building an error or allocating
// for an entry that passes: a decoder of a large index runs them for
// every entry, and any failure sends the text to the general decoder,
// which explains it. A NodeGroup is checked once per decode.
type canonicalRules struct {
	nodegroups map[string]bool
}

// key is ParseKey's rule for "<nodegroup>/<name>".
func (r *canonicalRules) key(s string) (Key, bool) {
	ng, name, ok := strings.Cut(s, "/")
	if !ok || !validDeploymentName(name) {
		return Key{}, false
	}
	valid, seen := r.nodegroups[ng]
	if !seen {
		if r.nodegroups == nil {
			r.nodegroups = map[string]bool{}
		}
		valid = validateNodeGroup(ng) == nil
		r.nodegroups[ng] = valid
	}
	return Key{NodeGroup: ng, Name: name}, valid
}

// canonicalPodPath reports whether p is a Pod payload path of NodeGroup ng
// (valid already): exactly when ParsePodPath accepts it and finds ng.
func canonicalPodPath(p, ng string) bool {
	rest, ok := strings.CutPrefix(p, NodeGroupsPrefix)
	if !ok {
		return false
	}
	if rest, ok = strings.CutPrefix(rest, ng); !ok {
		return false
	}
	if rest, ok = strings.CutPrefix(rest, "/pods/sha512/"); !ok {
		return false
	}
	digest, ok := strings.CutSuffix(rest, ".yaml")
	return ok && lowerHex(digest, SHA512HexLen)
}

// canonicalServicePath is ParseServicePath's rule, returning the Service
// identity when p passes.
func canonicalServicePath(p string) (ServiceID, bool) {
	rest, ok := strings.CutPrefix(p, ServicesPrefix)
	if !ok {
		return ServiceID{}, false
	}
	ns, rest, ok := strings.Cut(rest, "/")
	if !ok || !dnsLabel(ns) {
		return ServiceID{}, false
	}
	name, rest, ok := strings.Cut(rest, "/")
	if !ok || !dnsLabel(name) || !isLower(name[0]) {
		return ServiceID{}, false
	}
	if rest, ok = strings.CutPrefix(rest, "sha512/"); !ok {
		return ServiceID{}, false
	}
	digest, ok := strings.CutSuffix(rest, ".yaml")
	if !ok || !lowerHex(digest, SHA512HexLen) {
		return ServiceID{}, false
	}
	return ServiceID{Namespace: ns, Name: name}, true
}

// touch records that the entry of k changed since the index was decoded.
func (ix *Index) touch(k Key) {
	if ix.raw == nil {
		return
	}
	if ix.dirty == nil {
		ix.dirty = map[Key]struct{}{}
	}
	ix.dirty[k] = struct{}{}
}

// encodeSpliced is Encode for an index decoded from canonical text: runs of
// unchanged entries are copied from the text, and only the entries touched
// since are encoded.
func (ix *Index) encodeSpliced() []byte {
	raw := ix.raw
	type change struct {
		key string
		k   Key
	}
	changed := make([]change, 0, len(ix.dirty))
	for k := range ix.dirty {
		changed = append(changed, change{k.String(), k})
	}
	sort.Slice(changed, func(a, b int) bool { return changed[a].key < changed[b].key })
	out := make([]byte, 0, len(raw.text)+len(changed)*400)
	out = append(out, "{\n"...)
	members := 0
	sep := func() {
		if members > 0 {
			out = append(out, ",\n"...)
		}
		members++
	}
	i := 0
	for _, c := range changed {
		key := c.key
		// Copy the run of unchanged entries before key in one piece: the
		// text between their spans is exactly the separators.
		j := i + sort.SearchStrings(raw.keys[i:], key)
		if j > i {
			sep()
			out = append(out, raw.text[raw.spans[i][0]:raw.spans[j-1][1]]...)
			members += j - i - 1
		}
		i = j
		if i < len(raw.keys) && raw.keys[i] == key {
			i++ // replaced or removed
		}
		if e, ok := ix.entries[c.k]; ok {
			sep()
			out = appendMember(out, key, e, ix.history[c.k])
		}
	}
	if i < len(raw.keys) {
		sep()
		out = append(out, raw.text[raw.spans[i][0]:raw.spans[len(raw.keys)-1][1]]...)
		members += len(raw.keys) - i - 1
	}
	if members == 0 {
		return []byte("{}\n")
	}
	return append(out, "\n}\n"...)
}

// canonicalItems lists the entries in key order from the canonical text,
// without sorting, when nothing changed since it was decoded; keep selects
// a contiguous range of keys (all keys sharing a prefix are contiguous in
// byte order).
func (ix *Index) canonicalItems(prefix string) ([]Item, bool) {
	if ix.raw == nil || len(ix.dirty) > 0 {
		return nil, false
	}
	lo, hi := ix.raw.prefixRange(prefix)
	items := make([]Item, 0, hi-lo)
	for _, k := range ix.raw.parsed[lo:hi] {
		items = append(items, Item{Key: k, Entry: ix.entries[k]})
	}
	return items, true
}

// prefixRange is the range of keys starting with prefix.
func (r *rawIndex) prefixRange(prefix string) (int, int) {
	lo := sort.SearchStrings(r.keys, prefix)
	hi := lo
	for hi < len(r.keys) && strings.HasPrefix(r.keys[hi], prefix) {
		hi++
	}
	return lo, hi
}
