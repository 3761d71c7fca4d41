// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the corpus")

func corpusFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("corpus has %d manifests, want at least 10", len(files))
	}
	return files
}

// TestCorpus extracts realistic manifests and compares the payloads with
// golden files; run with -update to regenerate them after a deliberate
// change, then review the diff.
func TestCorpus(t *testing.T) {
	for _, file := range corpusFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Extract(in, ExtractOptions{})
			if err != nil {
				t.Fatalf("Extract() error = %v", err)
			}
			golden := r.PodYAML
			if r.ServiceYAML != nil {
				golden = append(append(bytes.Clone(r.PodYAML), "---\n"...), r.ServiceYAML...)
			}
			path := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				if err := os.WriteFile(path, golden, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestCorpus -update)", err)
			}
			if !bytes.Equal(golden, want) {
				t.Errorf("payload differs from %s:\n%s", path, golden)
			}
			if bytes.Contains(golden, []byte("creationTimestamp")) {
				t.Errorf("payload contains creationTimestamp")
			}
		})
	}
}

// TestDeterminism checks that equal input gives equal bytes, and that key
// order and document order in the input do not change the payloads.
func TestDeterminism(t *testing.T) {
	for _, file := range corpusFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			first, err := Extract(in, ExtractOptions{})
			if err != nil {
				t.Fatal(err)
			}
			second, err := Extract(in, ExtractOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first.PodYAML, second.PodYAML) || !bytes.Equal(first.ServiceYAML, second.ServiceYAML) {
				t.Fatal("two extractions differ")
			}
			// Re-encode every document with sorted keys, in reverse order.
			docs, err := splitStream(in)
			if err != nil {
				t.Fatal(err)
			}
			var reordered []string
			for i := len(docs) - 1; i >= 0; i-- {
				y, err := yaml.Marshal(docs[i].object)
				if err != nil {
					t.Fatal(err)
				}
				reordered = append(reordered, string(y))
			}
			third, err := Extract([]byte(strings.Join(reordered, "---\n")), ExtractOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first.PodYAML, third.PodYAML) || !bytes.Equal(first.ServiceYAML, third.ServiceYAML) {
				t.Fatalf("reordered input changed the payloads:\n%s\nvs\n%s", first.PodYAML, third.PodYAML)
			}
		})
	}
}
