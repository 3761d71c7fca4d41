// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestBucketLocation(t *testing.T) {
	p := New("/data")
	if got := p.Dir("demo"); got != filepath.Join("/data", "buckets", "demo") {
		t.Errorf("Dir(demo) = %s", got)
	}
	if got := p.Dir("/srv/podmin/../b"); got != "/srv/b" {
		t.Errorf("Dir(abs) = %s", got)
	}
	if err := p.ValidateBucketName("/"); err == nil {
		t.Error("the root directory was accepted as a bucket")
	}
	if err := p.ValidateBucketName("Bad"); err == nil || !strings.Contains(err.Error(), "or pass an absolute directory path") {
		t.Errorf("bad name: %v", err)
	}
	if r, err := p.ResolveRegion(context.Background(), "", ""); err != nil || r != Region {
		t.Errorf("region %q %v", r, err)
	}
	if _, err := p.ResolveRegion(context.Background(), "us-east-1", ""); err == nil {
		t.Error("a cloud region was accepted")
	}
}
