// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/scrub"
)

// MaxManifestBytes bounds the input of Extract. A deployment stream holds
// two small objects; anything larger is a mistake, not a manifest.
const MaxManifestBytes = 1 << 20

// document is one non-empty object of a stream, decoded to generic JSON
// values with json.Number for numbers so integers keep their exact text.
type document struct {
	subject    string // "document N", 1-based
	apiVersion string
	kind       string
	object     map[string]any
}

// splitStream decodes every non-empty document of a YAML or JSON stream.
// YAML documents are separated by "---" lines; a stream starting with "{"
// is read as a sequence of JSON objects. Duplicate keys are rejected in
// both forms, as a Kubernetes API server in strict mode would.
func splitStream(data []byte) ([]document, error) {
	if len(data) > MaxManifestBytes {
		return nil, &Error{Detail: fmt.Sprintf("the manifest is %d bytes; the limit is %d bytes", len(data), MaxManifestBytes)}
	}
	raws, err := rawDocuments(data)
	if err != nil {
		return nil, err
	}
	var docs []document
	for i, raw := range raws {
		subject := fmt.Sprintf("document %d", i+1)
		j, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return nil, &Error{Subject: subject, Detail: "invalid YAML: " + parserError(err)}
		}
		v, err := decodeJSON(j)
		if err != nil {
			return nil, &Error{Subject: subject, Detail: "invalid JSON: " + parserError(err)}
		}
		if v == nil {
			continue // an empty document, such as a trailing "---"
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, &Error{Subject: subject, Detail: "must be a Kubernetes object with apiVersion and kind, not " + describeDocument(v)}
		}
		d := document{subject: subject, object: obj}
		var p problems
		d.apiVersion = stringField(&p, subject, obj, "apiVersion")
		d.kind = stringField(&p, subject, obj, "kind")
		if !p.ok() {
			return nil, p.err()
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// rawDocuments splits the stream without interpreting it.
func rawDocuments(data []byte) ([][]byte, error) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		var out [][]byte
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		for i := 1; ; i++ {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return nil, &Error{Subject: fmt.Sprintf("document %d", i), Detail: "invalid JSON: " + parserError(err)}
			}
			// Compact JSON is valid YAML, so duplicate keys are found by
			// the same strict YAML decoder as for YAML input.
			var b bytes.Buffer
			if err := json.Compact(&b, raw); err != nil {
				return nil, &Error{Subject: fmt.Sprintf("document %d", i), Detail: "invalid JSON: " + parserError(err)}
			}
			out = append(out, b.Bytes())
		}
	}
	var out [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, &Error{Subject: fmt.Sprintf("document %d", i), Detail: "invalid YAML: " + parserError(err)}
		}
		out = append(out, raw)
	}
}

func decodeJSON(j []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func stringField(p *problems, subject string, obj map[string]any, key string) string {
	v, ok := obj[key]
	if !ok || v == nil {
		p.add(subject, key, "is required: each document must be an apps/v1 DaemonSet or a v1 Service")
		return ""
	}
	s, ok := v.(string)
	if !ok {
		p.add(subject, key, "must be a string, not %s", describe(v))
	}
	return s
}

// describe names a generic JSON value for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return scrub.Quote(v)
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprint(v)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// describeDocument names a whole document that is not an object without
// quoting it: a file that is one scalar (a key, a token) would otherwise
// be echoed whole.
func describeDocument(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("a string of %d bytes (not shown): check that the file is the manifest", len(v))
	case json.Number, bool:
		return "a scalar (not shown): check that the file is the manifest"
	}
	return describe(v)
}

// parserError renders a YAML or JSON parser's error with every piece of
// the input it quotes passed through the scrubber's quoting: bounded, and
// withheld where it shares text with a secret value.
func parserError(err error) string { return scrub.QuoteSpans(err.Error()) }
