// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package ids

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		id      string
		wantErr string
	}{
		{"prod", ""},
		{"a", ""},
		{"prod-eu-1", ""},
		{"a234567890123456789012345678901b", ""},
		{"", "invalid cluster ID: it is empty"},
		{"a2345678901234567890123456789012c", `invalid cluster ID "a2345678901234567890123456789012c": 33 characters is longer than 32`},
		{"1prod", `invalid cluster ID "1prod": it must start with a lowercase letter`},
		{"-prod", `invalid cluster ID "-prod": it must start with a lowercase letter`},
		{"prod-", `invalid cluster ID "prod-": it must not end with a hyphen`},
		{"Prod", `invalid cluster ID "Prod": it must start with a lowercase letter`},
		{"pro_d", `invalid cluster ID "pro_d": character '_' at position 4 is not allowed`},
		{"pro.d", `invalid cluster ID "pro.d": character '.' at position 4 is not allowed`},
		{"_system", `invalid cluster ID "_system": the name is reserved`},
		{"system", `invalid cluster ID "system": the name is reserved`},
		{"podmin", `invalid cluster ID "podmin": the name is reserved`},
	}
	for _, tc := range tests {
		err := ValidateCluster(tc.id)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%q: unexpected error %v", tc.id, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
			t.Errorf("%q: got %v, want prefix %q", tc.id, err, tc.wantErr)
		}
	}
	if err := ValidateNodeGroup("Workers"); err == nil || !strings.HasPrefix(err.Error(), `invalid NodeGroup ID "Workers"`) {
		t.Errorf("nodegroup error: %v", err)
	}
	if got := Reserved(); len(got) != 4 || got[0] != "_system" {
		t.Errorf("Reserved() = %v", got)
	}
}
