// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package otellogs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"podmin.dev/podmin/internal/paths"
)

// maxHeaders bounds the header map; exporters need a handful.
const maxHeaders = 32

// reservedHeaders are set by the exporter itself.
var reservedHeaders = []string{"content-type", "content-length", "content-encoding", "host", "transfer-encoding", "connection", "te"}

// ParseHeaders decodes the value of /<cluster>/_system/otel-logs-headers:
// a JSON object of header names to string values. Errors name headers,
// never values.
func ParseHeaders(data []byte) (map[string]string, error) {
	var h map[string]string
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&h); err != nil || h == nil || dec.More() {
		return nil, fmt.Errorf("otel-logs-headers is not a JSON object of header names to string values, e.g. {\"Authorization\": \"Bearer …\"}: update it with \"podmin secret update otel-logs-headers --system\"")
	}
	if err := CheckHeaders(h); err != nil {
		return nil, fmt.Errorf("%w: update it with \"podmin secret update otel-logs-headers --system\"", err)
	}
	return h, nil
}

// CheckHeaders validates header names and values without quoting values.
func CheckHeaders(h map[string]string) error {
	if len(h) > maxHeaders {
		return fmt.Errorf("otel-logs-headers has %d headers; the limit is %d: keep only the headers the exporter needs", len(h), maxHeaders)
	}
	seen := map[string]string{}
	for k, v := range h {
		if k == "" || strings.IndexFunc(k, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
			// The name is not quoted: a malformed entry may hold a value.
			return fmt.Errorf("otel-logs-headers: a header name is not a valid HTTP header name (letters, digits and !#$%%&'*+-.^_`|~ only)")
		}
		lower := strings.ToLower(k)
		for _, r := range reservedHeaders {
			if lower == r {
				return fmt.Errorf("otel-logs-headers: %s is set by the exporter; remove it", k)
			}
		}
		if prev, ok := seen[lower]; ok {
			return fmt.Errorf("otel-logs-headers: %s and %s are the same header; keep one", prev, k)
		}
		seen[lower] = k
		if v == "" || strings.TrimSpace(v) != v || strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return fmt.Errorf("otel-logs-headers: the value of %s is empty, has surrounding spaces or control characters: set a trimmed, printable value", k)
		}
	}
	return nil
}

func isTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// WriteConfig writes a rendered configuration atomically with mode 0600
// (it may hold header values).
func WriteConfig(path string, data []byte) error {
	return paths.WriteFileAtomic(path, data, 0o600)
}
