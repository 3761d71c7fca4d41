// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrInvalidIndex reports an index object that does not decode strictly.
var ErrInvalidIndex = errors.New("invalid deployments index")

// Encode returns the canonical JSON form of the index: keys in ascending
// byte order, two-space indentation, "pod" before "service", service omitted
// when absent, and a trailing newline. An empty index is "{}\n". Equal
// indexes encode to equal bytes, so an unchanged index is never rewritten
// with a different ETag.
//
// An index decoded from canonical bytes encodes by copying the bytes of
// the entries that did not change since and encoding only the others.
func (ix *Index) Encode() []byte {
	if ix.raw != nil {
		if len(ix.dirty) == 0 {
			return []byte(ix.raw.text)
		}
		return ix.encodeSpliced()
	}
	return ix.encodeItems(ix.Items())
}

// encodeItems is the canonical form of items, which are in key order,
// with the revisions ix records for them.
func (ix *Index) encodeItems(items []Item) []byte {
	if len(items) == 0 {
		return []byte("{}\n")
	}
	b := make([]byte, 0, len(items)*400)
	b = append(b, "{\n"...)
	for i, it := range items {
		// Keys and paths are validated to a character set that needs no
		// JSON escaping (lowercase letters, digits, '-', '.', '/').
		b = appendMember(b, it.Key.String(), it.Entry, ix.history[it.Key])
		if i < len(items)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return append(b, "}\n"...)
}

// DecodeIndex parses deployments/index.json strictly. Whitespace is free,
// but everything else must be exactly what the specification defines: a JSON
// object of "<nodegroup>/<deployment>" keys whose values have a "pod" path
// under that NodeGroup and an optional "service" path, no other or repeated
// fields, and no Service identity owned by two entries.
func DecodeIndex(data []byte) (*Index, error) {
	if ix, ok := decodeCanonical(data); ok {
		return ix, nil
	}
	ix, err := decodeIndex(data)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w: nothing acts on it until it is repaired: run \"podmin index rebuild\" to rebuild it from its readable entries and the payloads in the bucket", ErrInvalidIndex, IndexPath, err)
	}
	return ix, nil
}

func decodeIndex(data []byte) (*Index, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := expectDelim(dec, '{', "the index", ""); err != nil {
		return nil, err
	}
	ix := NewIndex()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		raw, _ := tok.(string)
		k, err := ParseKey(raw)
		if err != nil {
			return nil, err
		}
		if _, dup := ix.entries[k]; dup {
			return nil, fmt.Errorf("deployment %q appears twice", raw)
		}
		e, rawRevs, err := decodeEntry(dec, raw)
		if err != nil {
			return nil, err
		}
		id, hasService, err := e.validate(k)
		if err != nil {
			return nil, err
		}
		if rawRevs != nil {
			revs, err := decodeRevisions(k, rawRevs)
			if err != nil {
				return nil, err
			}
			if ix.history == nil {
				ix.history = map[Key][]Revision{}
			}
			ix.history[k] = revs
		}
		if hasService {
			if owner, taken := ix.services[id]; taken {
				return nil, fmt.Errorf("deployments %q and %q both own Service %q", owner, k, id)
			}
			ix.services[id] = k
		}
		ix.entries[k] = e
	}
	if err := expectDelim(dec, '}', "the index", ""); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the index object")
	}
	return ix, nil
}

// decodeEntry reads {"pod": "...", "service": "...", "revisions": [...]}
// for deployment key; the revisions come back undecoded, nil when absent.
func decodeEntry(dec *json.Decoder, key string) (Entry, json.RawMessage, error) {
	if err := expectDelim(dec, '{', "deployment", key); err != nil {
		return Entry{}, nil, err
	}
	var e Entry
	var revs json.RawMessage
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Entry{}, nil, err
		}
		field, _ := tok.(string)
		if seen[field] {
			return Entry{}, nil, fmt.Errorf("deployment %q: field %q appears twice", key, field)
		}
		seen[field] = true
		var target *string
		switch field {
		case "pod":
			target = &e.Pod
		case "service":
			target = &e.Service
		case "revisions":
			if err := dec.Decode(&revs); err != nil {
				return Entry{}, nil, fmt.Errorf("deployment %q: field \"revisions\": %w", key, err)
			}
			continue
		default:
			return Entry{}, nil, fmt.Errorf("deployment %q: unknown field %q: only \"pod\", \"service\" and \"revisions\" are allowed", key, field)
		}
		tok, err = dec.Token()
		if err != nil {
			return Entry{}, nil, err
		}
		s, ok := tok.(string)
		if !ok || s == "" {
			return Entry{}, nil, fmt.Errorf("deployment %q: field %q must be a non-empty path string (omit \"service\" when there is none)", key, field)
		}
		*target = s
	}
	if err := expectDelim(dec, '}', "deployment", key); err != nil {
		return Entry{}, nil, err
	}
	if !seen["pod"] {
		return Entry{}, nil, fmt.Errorf("deployment %q: missing field \"pod\"", key)
	}
	return e, revs, nil
}

// expectDelim reads one delimiter token; what and key name the value for
// the error (key quoted when set).
func expectDelim(dec *json.Decoder, want json.Delim, what, key string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok && d == want {
		return nil
	}
	if key != "" {
		what = fmt.Sprintf("%s %q", what, key)
	}
	if want == '{' {
		return fmt.Errorf("%s must be a JSON object", what)
	}
	return fmt.Errorf("%s: expected %q", what, string(want))
}
