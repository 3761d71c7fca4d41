// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// referenceEncode is the full encoder: every entry, sorted, encoded anew.
// The spliced encoding must equal it byte for byte.
func referenceEncode(ix *Index) []byte {
	return ix.encodeItems(ix.sorted(func(Key) bool { return true }))
}

// randomEntry is a valid entry for k, half of them with a Service; the
// Service identity is unique per key so Set never conflicts.
func randomEntry(r *rand.Rand, k Key) Entry {
	digest := func() string {
		const hexd = "0123456789abcdef"
		var b [SHA512HexLen]byte
		for i := range b {
			b[i] = hexd[r.IntN(16)]
		}
		return string(b[:])
	}
	pod, _ := PodPath(k.NodeGroup, digest())
	e := Entry{Pod: pod}
	if r.IntN(2) == 0 {
		svc := strings.ReplaceAll("s-"+k.NodeGroup+"-"+k.Name, ".", "-")
		if len(svc) > 63 {
			svc = svc[:63]
		}
		e.Service, _ = ServicePath("default", strings.TrimRight(svc, "-"), digest())
	}
	return e
}

// randomKey picks from a small space so edits hit existing entries, and
// includes NodeGroups whose names order around the "/" separator.
func randomKey(r *rand.Rand) Key {
	ngs := []string{"a", "a-b", "ab", "workers", "w", "workers-2"}
	return Key{NodeGroup: ngs[r.IntN(len(ngs))], Name: fmt.Sprintf("app-%d", r.IntN(40))}
}

func randomIndex(r *rand.Rand, n int) *Index {
	ix := NewIndex()
	for range n {
		k := randomKey(r)
		setRandom(r, ix, k)
	}
	return ix
}

// setRandom sets a random entry for k, recording it as a revision half of
// the time, as deploy does.
func setRandom(r *rand.Rand, ix *Index, k Key) {
	e := randomEntry(r, k)
	prev, existed, err := ix.Set(k, e)
	if err != nil {
		panic(err)
	}
	if r.IntN(2) == 0 {
		ix.record(k, prev, existed, Revision{Pod: e.Pod, Service: e.Service, Images: []string{"registry.podmin.internal/apps/x:v1"},
			Time: "2026-12-07T16:00:00Z", Write: "0123456789abcdef"})
	}
}

// FuzzCanonicalDecode checks the canonical scanner against the general
// decoder: whatever the scanner accepts, the decoder accepts with the same
// entries, and it is exactly Encode's form; and every input that is
// Encode's form of a valid index is taken by the scanner.
func FuzzCanonicalDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 5, 30} {
		f.Add(randomIndex(r, n).Encode())
	}
	seed := randomIndex(r, 4).Encode()
	f.Add(bytes.Replace(seed, []byte("\n  "), []byte("\n   "), 1))
	f.Add(bytes.Replace(seed, []byte(`"pod"`), []byte(`"p\u006fd"`), 1))
	f.Add(append(bytes.Clone(seed), ' '))
	f.Add([]byte("{}\n"))
	f.Add([]byte("{}"))
	// Revisions in forms only the general decoder takes, or neither.
	withRevs := randomIndex(rand.New(rand.NewPCG(3, 4)), 6).Encode()
	for _, edit := range [][2]string{
		{`"revision":`, `"revision":0`}, {`"revision":`, `"revision": `}, {`"images":["`, `"images":["\u0041`},
		{`"images":["`, `"images":["\"`}, {`"time":"2026-12-07T16:00:00Z"`, `"time":"2026-12-07T16:00:00+00:00"`},
		{`,"write":"`, `,"write":"x`}, {`[{"revision"`, `[ {"revision"`},
	} {
		f.Add(bytes.Replace(withRevs, []byte(edit[0]), []byte(edit[1]), 1))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		slow, slowErr := decodeIndex(data)
		fast, ok := decodeCanonical(data)
		if ok {
			if slowErr != nil {
				t.Fatalf("the scanner accepted what the decoder refuses (%v):\n%q", slowErr, data)
			}
			if !maps.Equal(fast.entries, slow.entries) || !maps.Equal(fast.services, slow.services) || !sameHistory(fast.history, slow.history) {
				t.Fatalf("the scanner and the decoder disagree:\n%q", data)
			}
			if got := fast.Encode(); !bytes.Equal(got, data) {
				t.Fatalf("the scanner accepted non-canonical bytes:\n%q\nencodes as\n%q", data, got)
			}
			if got := referenceEncode(fast); !bytes.Equal(got, data) {
				t.Fatalf("scanned index encodes differently in full:\n%q", got)
			}
			return
		}
		if slowErr == nil && bytes.Equal(referenceEncode(slow), data) {
			t.Fatalf("canonical bytes were left to the general decoder:\n%q", data)
		}
	})
}

// FuzzIncrementalEncode applies random edits to a decoded index and
// compares the spliced encoding, the listings and the NodeGroup views with
// the full encoder's.
func FuzzIncrementalEncode(f *testing.F) {
	f.Add(uint64(1), uint8(10), []byte{0, 1, 2, 3})
	f.Add(uint64(7), uint8(0), []byte{0, 0, 0})
	f.Add(uint64(9), uint8(60), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, ops []byte) {
		r := rand.New(rand.NewPCG(seed, 3))
		base := randomIndex(r, int(n))
		ix, err := DecodeIndex(base.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if ix.raw == nil {
			t.Fatal("a canonical index was not decoded by the scanner")
		}
		for _, op := range ops {
			k := randomKey(r)
			switch op % 3 {
			case 0:
				ix.Remove(k)
			default:
				setRandom(r, ix, k)
			}
		}
		want := referenceEncode(ix)
		if got := ix.Encode(); !bytes.Equal(got, want) {
			t.Fatalf("spliced encoding differs from the full one:\n%s\nwant:\n%s", got, want)
		}
		again, err := DecodeIndex(want)
		if err != nil || !maps.Equal(again.entries, ix.entries) || !sameHistory(again.history, ix.history) {
			t.Fatalf("the encoding does not decode to the index: %v", err)
		}
		for _, ng := range []string{"a", "a-b", "ab", "workers", "w", "workers-2", "none"} {
			for _, x := range []*Index{ix, again} {
				if got, want := x.NodeGroupView(ng), x.encodeItems(x.sorted(func(k Key) bool { return k.NodeGroup == ng })); !bytes.Equal(got, want) {
					t.Fatalf("view of %s:\n%s\nwant:\n%s", ng, got, want)
				}
			}
		}
	})
}

func TestCanonicalDecodeRefusesWhatTheDecoderRefuses(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	good := randomIndex(r, 3).Encode()
	pod := "nodegroups/workers/pods/sha512/" + strings.Repeat("0", 128) + ".yaml"
	for name, data := range map[string]string{
		"foreign pod path": strings.Replace(string(good), "\"pod\": \"nodegroups/", "\"pod\": \"nodegroupz/", 1),
		"unsorted":         "{\n  \"workers/b\": {\n    \"pod\": \"" + pod + "\"\n  },\n  \"workers/a\": {\n    \"pod\": \"" + pod + "\"\n  }\n}\n",
		"duplicate":        "{\n  \"workers/a\": {\n    \"pod\": \"" + pod + "\"\n  },\n  \"workers/a\": {\n    \"pod\": \"" + pod + "\"\n  }\n}\n",
		"trailing":         string(good) + "\n",
		"bad key":          "{\n  \"Workers/a\": {\n    \"pod\": \"" + pod + "\"\n  }\n}\n",
	} {
		if _, ok := decodeCanonical([]byte(data)); ok {
			t.Errorf("%s: the scanner accepted it", name)
		}
	}
	// Unsorted keys are valid JSON: the decoder takes them and Encode
	// sorts them.
	unsorted := "{\n  \"workers/b\": {\n    \"pod\": \"" + pod + "\"\n  },\n  \"workers/a\": {\n    \"pod\": \"" + pod + "\"\n  }\n}\n"
	ix, err := DecodeIndex([]byte(unsorted))
	if err != nil || ix.Len() != 2 || ix.raw != nil {
		t.Fatalf("unsorted index: %v", err)
	}
}

// FuzzCanonicalRules checks the scanner's allocation-free rules against
// the ones that explain a refusal: a key, a Pod path of the key's
// NodeGroup and a Service path pass exactly when ParseKey and
// Entry.validate accept them, with the same parts.
func FuzzCanonicalRules(f *testing.F) {
	d := strings.Repeat("0a", SHA512HexLen/2)
	for _, s := range []string{
		"workers/web", "workers/a.b-c", "workers/a..b", "workers/a.", "workers/.a", "workers/-a", "workers/a/b",
		"all/web", "1ng/web", "ng-/web", strings.Repeat("n", 33) + "/web", "workers/" + strings.Repeat("a", 64),
		"workers/" + strings.Repeat("a.", 127) + "a", "/web", "workers/", "workers",
		"nodegroups/workers/pods/sha512/" + d + ".yaml", "nodegroups/workers/pods/sha512/" + strings.ToUpper(d) + ".yaml",
		"nodegroups/workers/pods/sha512/" + d[1:] + ".yaml", "nodegroups/workers/pods/sha512/" + d + ".yml",
		"nodegroups/workers/pods/sha512/" + d + ".yaml/x", "nodegroups/workerz/pods/sha512/" + d + ".yaml",
		"services/default/web/sha512/" + d + ".yaml", "services/default/1web/sha512/" + d + ".yaml",
		"services/default/web/extra/sha512/" + d + ".yaml", "services/-x/web/sha512/" + d + ".yaml",
		"services//web/sha512/" + d + ".yaml", "services/default/web/sha512/" + d + "0.yaml",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var rules canonicalRules
		k, ok := rules.key(s)
		want, err := ParseKey(s)
		if ok != (err == nil) || ok && k != want {
			t.Fatalf("key %q: scanner says %v %v, ParseKey %v %v", s, k, ok, want, err)
		}
		for _, ng := range []string{"workers", "ng"} {
			key := Key{NodeGroup: ng, Name: "web"}
			if got, err := canonicalPodPath(s, ng), (Entry{Pod: s}).Validate(key); got != (err == nil) {
				t.Fatalf("Pod path %q of %s: scanner says %v, Validate %v", s, ng, got, err)
			}
		}
		id, ok := canonicalServicePath(s)
		wantID, _, err := ParseServicePath(s)
		if ok != (err == nil) || ok && id != wantID {
			t.Fatalf("Service path %q: scanner says %v %v, ParseServicePath %v %v", s, id, ok, wantID, err)
		}
	})
}

// sameHistory compares two revision maps, an empty map equal to none.
func sameHistory(a, b map[Key][]Revision) bool {
	return maps.EqualFunc(a, b, func(x, y []Revision) bool {
		return slices.EqualFunc(x, y, func(p, q Revision) bool {
			return p.Number == q.Number && p.Entry() == q.Entry() && slices.Equal(p.Images, q.Images) && p.Time == q.Time && p.Write == q.Write
		})
	})
}
