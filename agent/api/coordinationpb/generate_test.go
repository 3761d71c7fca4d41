// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinationpb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the code into a temporary
// directory and fails on any difference from the committed files.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc is not installed (apt-get install protobuf-compiler): cannot regenerate")
	}
	if testing.Short() {
		t.Skip("builds the protoc plugins: skipped in -short")
	}
	out := t.TempDir()
	cmd := exec.Command("../../../scripts/genproto.sh", "coordination.proto", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("genproto.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"coordination.pb.go", "coordination_grpc.pb.go"} {
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(withoutProtocVersion(got), withoutProtocVersion(want)) {
			t.Errorf("%s is stale: run make generate and commit the result", name)
		}
	}
}

// withoutProtocVersion drops the header line naming the protoc version,
// the one difference another protoc release makes to unchanged output.
func withoutProtocVersion(b []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("// \tprotoc ")) && !bytes.HasPrefix(line, []byte("// - protoc ")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
