// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/secrets"
)

func TestParseName(t *testing.T) {
	for path, want := range map[string]string{
		"/demo/default/web/db-password":   "pod",
		"/demo/_system/otel-logs-headers": "system",
		"/demo/_system/workload-ca-key":   "internal",
		"/demo/_system/cluster-ca":        "internal",
		"/demo/_system/other":             "",
		"demo/default/web/k":              "",
		"/demo/default/web":               "",
		"/demo/default/web/k/extra":       "",
		"/demo/Default/web/k":             "",
		"/demo/default/web/..":            "",
	} {
		n, err := secrets.ParseName(path)
		got := ""
		switch {
		case err != nil:
			if !errors.Is(err, secrets.ErrInvalid) {
				t.Errorf("ParseName(%q) error %v does not match ErrInvalid", path, err)
			}
		case n.Internal():
			got = "internal"
		case n.System():
			got = "system"
		default:
			got = "pod"
		}
		if got != want {
			t.Errorf("ParseName(%q) = %q (%v), want %q", path, got, err, want)
			continue
		}
		if err == nil && n.String() != path {
			t.Errorf("ParseName(%q).String() = %q", path, n)
		}
	}
}

func TestValueNeverFormats(t *testing.T) {
	v := secrets.Value("formatted-s3cret")
	b, err := json.Marshal(struct{ V secrets.Value }{v})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(v), fmt.Sprintf("%v %s %q %x %X %#v %+v", v, v, v, v, v, v, v), string(b), fmt.Errorf("wrapped %v", v).Error()} {
		if strings.Contains(s, "s3cret") || strings.Contains(strings.ToLower(s), fmt.Sprintf("%x", "s3cret")) {
			t.Errorf("formatted value leaks: %s", s)
		}
	}
}
