// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package vip_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/vip"
)

// The expected addresses were computed outside Go, with
// printf 'prod\0product\0database' | openssl dgst -sha512 -r
// and Python's hashlib, taking the first 16 hex digits as the low 64 bits.
var vectors = []struct {
	cluster, namespace, name string
	want                     string
}{
	{"prod", "product", "database", "fd50:6f64:6d69:0:cb57:3bae:a1ba:715b"},
	{"prod", "product", "frontend", "fd50:6f64:6d69:0:a887:50da:6ea9:c890"},
	{"demo", "default", "web", "fd50:6f64:6d69:0:c129:70c2:c119:31b2"},
	// The NUL separators keep these two apart.
	{"a", "bc", "d", "fd50:6f64:6d69:0:fe7c:c3c0:eb42:4673"},
	{"ab", "c", "d", "fd50:6f64:6d69:0:5122:f92b:6983:66f1"},
}

func TestForFixedVectors(t *testing.T) {
	for _, v := range vectors {
		got := vip.For(v.cluster, v.namespace, v.name)
		if got != netip.MustParseAddr(v.want) {
			t.Errorf("For(%q, %q, %q) = %v, want %v", v.cluster, v.namespace, v.name, got, v.want)
		}
		if !vip.In(got) {
			t.Errorf("%v is outside %v", got, vip.Prefix)
		}
	}
}

// independent computes the VIP with an external SHA-512 implementation.
type independent struct {
	name string
	cmd  func(input []byte) *exec.Cmd
	// digest extracts the hex digest from the command's output.
	digest func(out string) string
}

var tools = []independent{
	{"openssl", func([]byte) *exec.Cmd { return exec.Command("openssl", "dgst", "-sha512", "-r") },
		func(out string) string { return strings.Fields(out)[0] }},
	{"python3", func([]byte) *exec.Cmd {
		return exec.Command("python3", "-c", "import hashlib,sys; print(hashlib.sha512(sys.stdin.buffer.read()).hexdigest())")
	}, strings.TrimSpace},
	{"sha512sum", func([]byte) *exec.Cmd { return exec.Command("sha512sum") },
		func(out string) string { return strings.Fields(out)[0] }},
}

// TestForAgainstExternalSHA512 checks the formula against whichever
// external SHA-512 programs this machine has, over names of every length
// class the manifest rules allow.
func TestForAgainstExternalSHA512(t *testing.T) {
	inputs := [][3]string{{"prod", "product", "database"}, {"c", "n", "s"},
		{"cluster-with-a-long-name", strings.Repeat("n", 63), strings.Repeat("s", 63)}}
	for i := range 20 {
		inputs = append(inputs, [3]string{fmt.Sprintf("cl%d", i), fmt.Sprintf("ns-%d", i*7), fmt.Sprintf("svc-%d", i*13)})
	}
	ran := 0
	for _, tool := range tools {
		if _, err := exec.LookPath(tool.cmd(nil).Path); err != nil {
			continue
		}
		ran++
		t.Run(tool.name, func(t *testing.T) {
			for _, in := range inputs {
				payload := []byte(in[0] + "\x00" + in[1] + "\x00" + in[2])
				cmd := tool.cmd(payload)
				cmd.Stdin = bytes.NewReader(payload)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s: %v", tool.name, err)
				}
				sum, err := hex.DecodeString(tool.digest(string(out)))
				if err != nil || len(sum) != 64 {
					t.Fatalf("%s printed %q, not a SHA-512 digest", tool.name, out)
				}
				var a [16]byte
				copy(a[:], []byte{0xfd, 0x50, 0x6f, 0x64, 0x6d, 0x69})
				copy(a[8:], sum[:8])
				want := netip.AddrFrom16(a)
				if got := vip.For(in[0], in[1], in[2]); got != want {
					t.Errorf("For%q = %v, %s says %v", in, got, tool.name, want)
				}
			}
		})
	}
	if ran == 0 {
		t.Skip("no external SHA-512 program (openssl, python3, sha512sum) on PATH; the fixed vectors still ran")
	}
}

func TestForIsStableAndDistinct(t *testing.T) {
	seen := map[netip.Addr]string{}
	for ns := range 30 {
		for s := range 30 {
			name := fmt.Sprintf("ns%d/svc%d", ns, s)
			a := vip.For("prod", fmt.Sprintf("ns%d", ns), fmt.Sprintf("svc%d", s))
			if other, dup := seen[a]; dup {
				t.Fatalf("%s and %s share %v", name, other, a)
			}
			seen[a] = name
			if a != vip.For("prod", fmt.Sprintf("ns%d", ns), fmt.Sprintf("svc%d", s)) {
				t.Fatalf("%s: VIP changed between calls", name)
			}
		}
	}
	if vip.For("prod", "a", "b") == vip.For("staging", "a", "b") {
		t.Fatal("two clusters gave a Service the same VIP")
	}
}
