// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// WriteNodeGroupsMeta is the index metadata that records which NodeGroups
// the recent writes changed, and the view digest each of them has in this
// version (see "NodeGroup views" in the package documentation). Its value
// is "<horizon>" followed by ",<tag><digest><age>" per NodeGroup, most
// recently changed first: horizon and age two hex digits, tag 8 and
// digest 16 hex characters.
const WriteNodeGroupsMeta = "podmin-write-ngs"

const (
	ngTagLen   = 8
	ngTouchLen = ngTagLen + viewDigestLen + 2
)

// nodeGroupTag names a NodeGroup in the metadata: 8 hex characters of
// SHA-256. Two NodeGroups with one tag only cost reads (their view digests
// differ), never a wrong conclusion.
func nodeGroupTag(nodegroup string) string {
	sum := sha256.Sum256([]byte("podmin nodegroup\x00" + nodegroup))
	return hex.EncodeToString(sum[:])[:ngTagLen]
}

// ngTouch is the last change of one NodeGroup among the recorded writes.
type ngTouch struct {
	tag, digest string
	// age is the position in the chain of the write that last changed the
	// NodeGroup: 0 is the version's own write.
	age int
}

// ngHistory is what a version's metadata says about the NodeGroups its
// recent writes changed. For the version's chain C:
//
//   - a NodeGroup listed with age a was changed by write C[a] and by none
//     of C[0..a-1], and its view now has the listed digest;
//   - a NodeGroup not listed was changed by none of C[0..horizon-1].
type ngHistory struct {
	horizon int
	touches []ngTouch
}

// parseNGHistory reads the history recorded with a version whose chain
// has chainLen IDs. Anything malformed is no history at all (horizon 0,
// nothing listed): readers then fall back to the index.
func parseNGHistory(v string, chainLen int) ngHistory {
	if chainLen == 0 || len(v) < 2 || (len(v)-2)%(ngTouchLen+1) != 0 {
		return ngHistory{}
	}
	h, err := strconv.ParseUint(v[:2], 16, 8)
	if err != nil || int(h) > chainLen {
		return ngHistory{}
	}
	out := ngHistory{horizon: int(h)}
	for rest := v[2:]; rest != ""; rest = rest[ngTouchLen+1:] {
		t := rest[1 : ngTouchLen+1]
		age, err := strconv.ParseUint(t[ngTagLen+viewDigestLen:], 16, 8)
		if rest[0] != ',' || err != nil || int(age) >= chainLen || !isHex(t[:ngTagLen+viewDigestLen]) ||
			len(out.touches) > 0 && int(age) < out.touches[len(out.touches)-1].age ||
			slices.ContainsFunc(out.touches, func(o ngTouch) bool { return o.tag == t[:ngTagLen] }) {
			return ngHistory{}
		}
		out.touches = append(out.touches, ngTouch{tag: t[:ngTagLen], digest: t[ngTagLen : ngTagLen+viewDigestLen], age: int(age)})
	}
	return out
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

func (h ngHistory) encode() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%02x", h.horizon)
	for _, t := range h.touches {
		fmt.Fprintf(&b, ",%s%s%02x", t.tag, t.digest, t.age)
	}
	return b.String()
}

// change is what one index write did to the NodeGroups: the view digests
// of those it changed, and whether it may have changed others too (a
// rebuild, whose base could not be read).
type change struct {
	views map[string]string // NodeGroup → view digest in the new version
	all   bool
}

// changeOf is a change of the listed NodeGroups of ix, the new version.
func changeOf(ix *Index, all bool, nodegroups ...string) change {
	c := change{views: map[string]string{}, all: all}
	for _, ng := range nodegroups {
		c.views[ng] = ViewDigest(ng, ix.NodeGroupView(ng))
	}
	return c
}

// next is the history of a version written on top of one with history h
// (base chain length baseLen) making change c; the new chain has chainLen
// IDs. It lists c's NodeGroups at age 0, ages the rest by one, and keeps
// the horizon: a write whose effect is only partly known (c.all) starts
// it again at 0.
func (h ngHistory) next(c change, baseLen, chainLen int) ngHistory {
	out := ngHistory{horizon: min(h.horizon+1, chainLen)}
	if baseLen == 0 || c.all {
		out.horizon = min(1, chainLen)
		if c.all {
			out.horizon = 0
		}
	}
	tags := map[string]bool{}
	for _, ng := range slices.Sorted(maps.Keys(c.views)) {
		t := nodeGroupTag(ng)
		if tags[t] {
			// Two changed NodeGroups share a tag: neither can be listed,
			// and nothing before this write is known for that tag.
			out.horizon = 0
			continue
		}
		tags[t] = true
		out.touches = append(out.touches, ngTouch{tag: t, digest: c.views[ng], age: 0})
	}
	if c.all || baseLen == 0 {
		return out
	}
	for _, t := range h.touches {
		if tags[t.tag] {
			continue
		}
		if t.age+1 >= chainLen {
			out.horizon = min(out.horizon, t.age+1)
			continue
		}
		out.touches = append(out.touches, ngTouch{tag: t.tag, digest: t.digest, age: t.age + 1})
	}
	return out
}

// fit drops the oldest entries until the metadata, with this history,
// stays within indexMetaBudget; each dropped change moves the horizon to
// before it.
func (h ngHistory) fit(meta map[string]string) ngHistory {
	used := 0
	for k, v := range meta {
		used += len(k) + len(v)
	}
	room := indexMetaBudget - used - len(WriteNodeGroupsMeta) - 2
	keep := max(0, min(len(h.touches), room/(ngTouchLen+1)))
	for _, t := range h.touches[keep:] {
		h.horizon = min(h.horizon, t.age)
	}
	h.touches = h.touches[:keep]
	return h
}

// IndexMeta is what the object metadata of one index version proves: its
// write-ID chain and which NodeGroups its recent writes changed.
type IndexMeta struct {
	// Chain is the version's write ID and those before it, newest first;
	// empty for an index written without IDs.
	Chain []string
	hist  ngHistory
}

// ParseIndexMeta reads the metadata of an index version (from a Get or a
// Head). Malformed parts prove nothing.
func ParseIndexMeta(meta map[string]string) IndexMeta {
	chain := chainFrom(meta)
	return IndexMeta{Chain: chain, hist: parseNGHistory(meta[WriteNodeGroupsMeta], len(chain))}
}

// WriteID is the version's own write ID ("" without one).
func (m IndexMeta) WriteID() string {
	if len(m.Chain) == 0 {
		return ""
	}
	return m.Chain[0]
}

// NodeGroupProof is what an index version's metadata proves about one
// NodeGroup's entries.
type NodeGroupProof struct {
	// Unchanged: no write after the version asked about changed the
	// NodeGroup's entries, so they are what they were in that version.
	Unchanged bool
	// Digest is the ViewDigest of the NodeGroup's view in this version,
	// when the metadata records it ("" otherwise).
	Digest string
}

// NodeGroup says what m proves about nodegroup's entries, compared with
// the version whose write ID is since ("" for none). Nothing is concluded
// from content or ETags, only from the recorded writes: a version is in
// the chain only if it was read by the writer that built on it, and each
// write records what it changed relative to the content it read.
func (m IndexMeta) NodeGroup(nodegroup, since string) NodeGroupProof {
	tag := nodeGroupTag(nodegroup)
	var p NodeGroupProof
	age := -1
	for _, t := range m.hist.touches {
		if t.tag == tag {
			age, p.Digest = t.age, t.digest
			break
		}
	}
	if since == "" {
		return p
	}
	if j := slices.Index(m.Chain, since); j >= 0 {
		if age >= 0 {
			p.Unchanged = age >= j
		} else {
			p.Unchanged = j <= m.hist.horizon
		}
	}
	return p
}
