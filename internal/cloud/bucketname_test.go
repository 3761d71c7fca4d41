// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"strings"
	"testing"
)

func TestValidateS3BucketName(t *testing.T) {
	tests := []struct{ name, wantErr string }{
		{"my-bucket", ""},
		{"a.b-c.123", ""},
		{"ab", "2 characters"},
		{strings.Repeat("a", 64), "64 characters"},
		{"My-Bucket", "character 'M' is not allowed"},
		{"my_bucket", "character '_' is not allowed"},
		{"-bucket", "must start and end with a letter or digit"},
		{"bucket.", "must start and end with a letter or digit"},
		{"a..b", "two adjacent dots"},
		{"192.168.1.1", "formatted as an IP address"},
		{"xn--bucket", "prefix xn-- is reserved"},
		{"bucket-s3alias", "suffix -s3alias is reserved"},
	}
	for _, tc := range tests {
		err := ValidateS3BucketName(tc.name)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.name, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: got %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
