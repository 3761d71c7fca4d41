// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"strings"
	"testing"
)

func TestParsePrefix(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{"2600:1f14:abc:de00:1234::/80", ""},
		{"", "--ipv6-prefix is required"},
		{"bogus", "is not an IP prefix"},
		{"10.0.0.0/8", "is not IPv6"},
		{"2600:1f14:abc:de00::/64", "is a /64, not a /80"},
		{"fd00:1:2:3:4::/80", "is not global unicast"},
		{"fe80::/80", "is not global unicast"},
		{"2600:1f14:abc:de00:1234::1/80", "is not canonical"},
		{"2600:1F14:abc:de00:1234::/80", "is not canonical"},
	}
	for _, tc := range tests {
		_, err := ParsePrefix(tc.in)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestValidateJoinsAllProblems(t *testing.T) {
	err := Config{Provider: "gcp", Cluster: "Bad", NodeGroup: "ok"}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"--provider \"gcp\"", "--bucket is required", "--region is required", "--cluster: invalid cluster ID", "--ipv6-prefix is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	p, _ := ParsePrefix("2600:1f14:abc:de00:1234::/80")
	ok := Config{Provider: "aws", Bucket: "b", Region: "us-west-2", Cluster: "prod", NodeGroup: "workers", IPv6Prefix: p}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
}
