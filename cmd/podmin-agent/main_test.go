// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestAgentFlags(t *testing.T) {
	valid := []string{"--provider", "aws", "--bucket", "b", "--region", "us-west-2", "--cluster", "prod",
		"--nodegroup", "workers", "--ipv6-prefix", "2600:1f14:abc:de00:1234::/80"}
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"valid", valid, 0, "configuration valid"},
		{"no flags", nil, 1, "--bucket is required"},
		{"bad prefix", append(append([]string{}, valid[:10]...), "--ipv6-prefix", "2600:1f14::/64"), 1, "is a /64, not a /80"},
		{"bad nodegroup", append(append([]string{}, valid[:8]...), "--nodegroup", "Workers", "--ipv6-prefix", "2600:1f14:abc:de00:1234::/80"), 1, "--nodegroup: invalid NodeGroup ID"},
		{"unknown flag", append([]string{"--listen", ":80"}, valid...), 2, "flag provided but not defined: -listen"},
		{"positional", append(valid, "extra"), 2, "takes no arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.wantErr) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant %q", code, tc.code, errb.String(), tc.wantErr)
			}
		})
	}
	var out bytes.Buffer
	if code := run([]string{"--version"}, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "podmin-agent ") {
		t.Fatalf("--version: %d %q", code, out.String())
	}
}
