// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"io"
	"sort"
	"strings"
	"sync"
)

// scrubber remembers every secret value a run has seen and replaces it in
// everything the run prints with <secret KEY>.
type scrubber struct {
	mu      sync.Mutex
	secrets map[string]string // value → key
}

func (s *scrubber) add(key, value string) {
	if value == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secrets == nil {
		s.secrets = map[string]string{}
	}
	s.secrets[value] = key
}

// replace scrubs longer values first, so a secret that contains another is
// replaced whole.
func (s *scrubber) replace(text string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.secrets) == 0 {
		return text
	}
	values := make([]string, 0, len(s.secrets))
	for v := range s.secrets {
		values = append(values, v)
	}
	sort.Slice(values, func(i, j int) bool {
		if len(values[i]) != len(values[j]) {
			return len(values[i]) > len(values[j])
		}
		return values[i] < values[j]
	})
	for _, v := range values {
		text = strings.ReplaceAll(text, v, "<secret "+s.secrets[v]+">")
	}
	return text
}

// writer wraps w so that each write is scrubbed. Callers write whole
// messages (print writes a line at a time), so a secret is never split
// across writes.
func (s *scrubber) writer(w io.Writer) io.Writer { return scrubWriter{s, w} }

type scrubWriter struct {
	s *scrubber
	w io.Writer
}

func (sw scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(sw.w, sw.s.replace(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
