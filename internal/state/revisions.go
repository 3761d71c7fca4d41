// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/yaml"
)

// MaxRevisions bounds the revisions one index entry records, its current
// one included. Every node reads the whole index with each commit, so the
// list costs bytes on every read: ten keep an operator's recent history
// without letting an often-deployed entry grow without end.
const MaxRevisions = 10

// maxImageRef bounds one recorded image reference, as a reference longer
// than any registry accepts is not an image.
const maxImageRef = 1024

// Revision is one revision of a deployment as its index entry records it:
// the payloads it committed (their digests live only in the paths, as in
// the entry itself), the images of its Pod, and the index write that
// committed it. A revision committed before revisions were recorded has no
// images, time or write: they are unknown, not absent.
type Revision struct {
	// Number counts the deployment's revisions from 1, newest highest.
	Number int `json:"revision"`
	// Pod is the revision's Pod payload path.
	Pod string `json:"pod"`
	// Service is its Service payload path, empty without a Service.
	Service string `json:"service,omitempty"`
	// Images are the Pod's container images, init containers first.
	Images []string `json:"images,omitempty"`
	// Time is when the write that committed it was made, RFC 3339 UTC.
	Time string `json:"time,omitempty"`
	// Write is the ID of that index write (the index object's
	// podmin-write-id metadata of the version it produced).
	Write string `json:"write,omitempty"`
}

// Entry is the index entry the revision committed.
func (r Revision) Entry() Entry { return Entry{Pod: r.Pod, Service: r.Service} }

// Revisions lists the recorded revisions of k, newest first; nil when the
// entry records none (an entry written before revisions were recorded).
func (ix *Index) Revisions(k Key) []Revision {
	return slices.Clone(ix.history[k])
}

// record notes that the entry of k became cur, replacing prev (existed
// says whether there was one). A previous entry the list does not describe
// as its newest revision (an entry committed before revisions were
// recorded, or set by a rebuild) is recorded first, with what is known of
// it: its paths.
func (ix *Index) record(k Key, prev Entry, existed bool, cur Revision) {
	revs := ix.history[k]
	if existed && (len(revs) == 0 || revs[0].Entry() != prev) {
		n := 1
		if len(revs) > 0 {
			n = revs[0].Number + 1
		}
		revs = append([]Revision{{Number: n, Pod: prev.Pod, Service: prev.Service}}, revs...)
	}
	cur.Number = 1
	if len(revs) > 0 {
		cur.Number = revs[0].Number + 1
	}
	revs = append([]Revision{cur}, revs...)
	if ix.history == nil {
		ix.history = map[Key][]Revision{}
	}
	ix.history[k] = revs[:min(len(revs), MaxRevisions)]
	ix.touch(k)
}

// encodeRevisions is the canonical form of a revision list: compact JSON
// on one line.
func encodeRevisions(revs []Revision) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(revs) // plain strings and ints always encode
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// decodeRevisions parses and checks the "revisions" value of deployment k.
func decodeRevisions(k Key, data []byte) ([]Revision, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var revs []Revision
	if err := dec.Decode(&revs); err != nil {
		return nil, fmt.Errorf("deployment %q: field \"revisions\": %w", k, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("deployment %q: field \"revisions\": unexpected data after the list", k)
	}
	if err := validateRevisions(k, revs); err != nil {
		return nil, err
	}
	return revs, nil
}

// validateRevisions applies the index rules to a revision list: 1 to
// MaxRevisions revisions, numbered from 1 and strictly descending, each
// with valid payload paths for k and well-formed images, time and write ID.
func validateRevisions(k Key, revs []Revision) error {
	if err := validateRevisionFields(k, revs); err != nil {
		return err
	}
	for _, r := range revs {
		if _, _, err := r.Entry().validate(k); err != nil {
			return fmt.Errorf("revision %d: %w", r.Number, err)
		}
	}
	return nil
}

// validateRevisionFields is validateRevisions without the payload paths,
// which the canonical scanner checks with its own allocation-free rules.
func validateRevisionFields(k Key, revs []Revision) error {
	if len(revs) == 0 || len(revs) > MaxRevisions {
		return fmt.Errorf("deployment %q: field \"revisions\" must list 1 to %d revisions (omit it when there are none), not %d", k, MaxRevisions, len(revs))
	}
	for i, r := range revs {
		if r.Number < 1 || i > 0 && r.Number >= revs[i-1].Number {
			return fmt.Errorf("deployment %q: revision numbers must be positive and strictly descending, newest first", k)
		}
		for _, img := range r.Images {
			if !validImageText(img) {
				return fmt.Errorf("deployment %q: revision %d: an image reference must be 1 to %d printable ASCII characters without quotes or backslashes", k, r.Number, maxImageRef)
			}
		}
		if r.Time != "" {
			t, err := time.Parse(time.RFC3339, r.Time)
			if err != nil || t.UTC().Format(time.RFC3339) != r.Time {
				return fmt.Errorf("deployment %q: revision %d: time %q is not an RFC 3339 UTC time in seconds", k, r.Number, r.Time)
			}
		}
		if r.Write != "" && !validWriteID(r.Write) {
			return fmt.Errorf("deployment %q: revision %d: write %q is not a write ID (16 lowercase hex characters)", k, r.Number, r.Write)
		}
	}
	return nil
}

// validImageText is the rule for a recorded image reference: what a
// reference can hold (printable ASCII), minus the two characters JSON
// would escape, so its canonical text is the reference itself.
func validImageText(s string) bool {
	if s == "" || len(s) > maxImageRef {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\' {
			return false
		}
	}
	return true
}

// canonicalRevisions decodes the one-line revisions value of canonical
// text, accepting it only in exactly the form encodeRevisions writes. It
// scans the text instead of decoding JSON: every string in it is made of
// characters JSON does not escape, so the text is its own value, and an
// index of many entries decodes without reflection.
func canonicalRevisions(k Key, line string) ([]Revision, bool) {
	sc := scanner{s: line}
	if !sc.lit("[") {
		return nil, false
	}
	var revs []Revision
	for {
		var r Revision
		var ok bool
		if !sc.lit(`{"revision":`) {
			return nil, false
		}
		if r.Number, ok = sc.positive(); !ok || !sc.lit(`,"pod":"`) {
			return nil, false
		}
		if r.Pod, ok = sc.str(); !ok || !sc.lit(`"`) {
			return nil, false
		}
		if sc.lit(`,"service":"`) {
			if r.Service, ok = sc.str(); !ok || !sc.lit(`"`) {
				return nil, false
			}
		}
		if sc.lit(`,"images":[`) {
			for {
				if !sc.lit(`"`) {
					return nil, false
				}
				img, ok := sc.text()
				if !ok || !sc.lit(`"`) {
					return nil, false
				}
				r.Images = append(r.Images, img)
				if sc.lit(",") {
					continue
				}
				if sc.lit("]") {
					break
				}
				return nil, false
			}
		}
		if sc.lit(`,"time":"`) {
			if r.Time, ok = sc.text(); !ok || !sc.lit(`"`) {
				return nil, false
			}
		}
		if sc.lit(`,"write":"`) {
			if r.Write, ok = sc.text(); !ok || !sc.lit(`"`) {
				return nil, false
			}
		}
		if !sc.lit("}") {
			return nil, false
		}
		revs = append(revs, r)
		if sc.lit(",") {
			continue
		}
		if sc.lit("]") && sc.i == len(line) {
			break
		}
		return nil, false
	}
	for _, r := range revs {
		if !canonicalPodPath(r.Pod, k.NodeGroup) {
			return nil, false
		}
		if _, ok := canonicalServicePath(r.Service); r.Service != "" && !ok {
			return nil, false
		}
	}
	if validateRevisionFields(k, revs) != nil {
		return nil, false
	}
	return revs, true
}

// positive consumes a decimal number as JSON writes a positive int: no
// sign, no leading zero, at most 18 digits.
func (sc *scanner) positive() (int, bool) {
	n, j := 0, sc.i
	for j < len(sc.s) && isDigit(sc.s[j]) && j-sc.i < 18 {
		n = n*10 + int(sc.s[j]-'0')
		j++
	}
	if j == sc.i || sc.s[sc.i] == '0' || j < len(sc.s) && isDigit(sc.s[j]) {
		return 0, false
	}
	sc.i = j
	return n, true
}

// text consumes a non-empty string body of printable ASCII without quotes
// or backslashes, up to its closing quote.
func (sc *scanner) text() (string, bool) {
	j := sc.i
	for j < len(sc.s) && sc.s[j] != '"' {
		if sc.s[j] < 0x21 || sc.s[j] > 0x7e || sc.s[j] == '\\' {
			return "", false
		}
		j++
	}
	if j == sc.i {
		return "", false
	}
	v := sc.s[sc.i:j]
	sc.i = j
	return v, true
}

// podImages lists the images of a Pod payload, init containers first, in
// the order of the spec.
func podImages(podYAML []byte) []string {
	var pod struct {
		Spec struct {
			InitContainers []struct {
				Image string `json:"image"`
			} `json:"initContainers"`
			Containers []struct {
				Image string `json:"image"`
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(podYAML, &pod); err != nil {
		return nil
	}
	var out []string
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if c.Image != "" && len(c.Image) <= maxImageRef && !slices.Contains(out, c.Image) {
			out = append(out, c.Image)
		}
	}
	return out
}

// ErrNoRevision reports a rollback target the entry's revisions do not
// hold.
var ErrNoRevision = errors.New("no such revision")
