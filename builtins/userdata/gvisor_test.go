// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestInstallGVisorFindsTheBinaries runs the script's own install_gvisor
// with bash on real bzip2 tar archives: runsc and the shim are found
// wherever the archive keeps them, and an archive without exactly one of
// each stops bootstrap.
func TestInstallGVisorFindsTheBinaries(t *testing.T) {
	for _, tool := range []string{"bash", "tar", "bzip2", "find"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	fn := regexp.MustCompile(`(?ms)^install_gvisor\(\) \{\n.*?^\}\n`).FindString(awsScript)
	if fn == "" {
		t.Fatal("aws.sh.tmpl defines no install_gvisor")
	}
	for _, tc := range []struct {
		name  string
		files []string
		want  string // an error, or empty
	}{
		{"flat", []string{"runsc", "containerd-shim-runsc-v1", "runsc.sha512"}, ""},
		{"nested", []string{"release-20251110.0/bin/runsc", "release-20251110.0/bin/containerd-shim-runsc-v1", "release-20251110.0/README"}, ""},
		{"no shim", []string{"bin/runsc"}, "holds 0 files named containerd-shim-runsc-v1, want exactly one"},
		{"two runsc", []string{"a/runsc", "b/runsc", "containerd-shim-runsc-v1"}, "holds 2 files named runsc, want exactly one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dest := t.TempDir(), t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(src, "tree", f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("binary "+f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			archive := filepath.Join(src, "gvisor.tar.bz2")
			if out, err := exec.Command("tar", "-cjf", archive, "-C", filepath.Join(src, "tree"), ".").CombinedOutput(); err != nil {
				t.Fatalf("tar: %v\n%s", err, out)
			}
			script := "set -euo pipefail\nlog() { printf '%s\\n' \"$*\" >&2; }\ndie() { log \"$*\"; exit 1; }\n" + fn + `install_gvisor "$1" "$2"` + "\n"
			cmd := exec.Command("bash", "-c", script, "bash", archive, dest)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if tc.want != "" {
				if err == nil || !strings.Contains(stderr.String(), tc.want) {
					t.Fatalf("install_gvisor: %v, stderr %q; want %q", err, stderr.String(), tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("install_gvisor: %v\n%s", err, stderr.String())
			}
			entries, _ := os.ReadDir(dest)
			if len(entries) != 2 {
				t.Fatalf("installed %v, want runsc and the shim only", entries)
			}
			for _, bin := range []string{"runsc", "containerd-shim-runsc-v1"} {
				st, err := os.Stat(filepath.Join(dest, bin))
				data, _ := os.ReadFile(filepath.Join(dest, bin))
				if err != nil || st.Mode().Perm() != 0o755 || !strings.HasSuffix(string(data), bin) {
					t.Errorf("%s: %v %v %q", bin, err, st, data)
				}
			}
		})
	}
}
