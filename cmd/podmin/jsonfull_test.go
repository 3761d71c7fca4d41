// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"net/netip"
	"testing"
	"time"

	"podmin.dev/podmin/builtins/infra"
)

func TestMarshalFullKeepsEveryField(t *testing.T) {
	type inner struct {
		Digest string `json:"digest"`
	}
	type entry struct {
		inner
		Name     string            `json:"name"`
		Service  string            `json:"service,omitempty"`
		Ports    []int             `json:"ports,omitempty"`
		Labels   map[string]string `json:"labels,omitempty"`
		Deleting *time.Time        `json:"deleting,omitempty"`
		Modified time.Time         `json:"modified,omitempty"`
		Any      any               `json:"any"`
		Raw      []byte            `json:"raw"`
		Prefix   *netip.Prefix     `json:"prefix,omitempty"`
		Hidden   string            `json:"-"`
		private  string
		Plain    bool
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prefix := netip.MustParsePrefix("2001:db8::/80")
	got, err := marshalFull([]entry{
		{Name: "web"},
		{inner: inner{"sha256:1"}, Name: "api", Service: "api", Ports: []int{443}, Labels: map[string]string{"b": "2", "a": "1"}, Deleting: &at, Modified: at, Any: 1, Raw: []byte("x"), Prefix: &prefix, Hidden: "h", private: "p", Plain: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "digest": "",
    "name": "web",
    "service": "",
    "ports": [],
    "labels": {},
    "deleting": null,
    "modified": null,
    "any": null,
    "raw": null,
    "prefix": "",
    "Plain": false
  },
  {
    "digest": "sha256:1",
    "name": "api",
    "service": "api",
    "ports": [
      443
    ],
    "labels": {
      "a": "1",
      "b": "2"
    },
    "deleting": "2026-01-02T03:04:05Z",
    "modified": "2026-01-02T03:04:05Z",
    "any": 1,
    "raw": "eA==",
    "prefix": "2001:db8::/80",
    "Plain": true
  }
]`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if empty, _ := marshalFull([]entry(nil)); string(empty) != "[]" {
		t.Errorf("a nil list is %s, want []", empty)
	}
}

// TestMarshalFullShowsFlagStrings: setup's --workload-ca-publish is shown
// as the s3:// string it was given, and as "" when it was not.
func TestMarshalFullShowsFlagStrings(t *testing.T) {
	type doc struct {
		Set   *infra.S3Object `json:"set,omitempty"`
		Unset *infra.S3Object `json:"unset,omitempty"`
	}
	got, err := marshalFull(doc{Set: &infra.S3Object{Bucket: "trust", Key: "ca.pem"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"set\": \"s3://trust/ca.pem\",\n  \"unset\": \"\"\n}"; string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
