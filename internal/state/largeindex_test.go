// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// TestDeployRefusesALargeIndexWithOneBadEntry damages one entry of a
// 1,000-entry index in place, keeping the canonical layout, so the fast
// decoder is the first to see it. Every entry is checked on every read,
// not only the one a deploy touches: a deploy elsewhere refuses the
// index and names the damaged entry, and the index is not rewritten
// (the specification: nothing acts on an invalid index until it is
// repaired).
func TestDeployRefusesALargeIndexWithOneBadEntry(t *testing.T) {
	ix := state.NewIndex()
	entries := map[string]state.Entry{}
	for i := range 1000 {
		ng := fmt.Sprintf("ng%02d", i%10)
		k := state.Key{NodeGroup: ng, Name: fmt.Sprintf("app-%04d", i)}
		var e state.Entry
		var err error
		if e.Pod, err = state.PodPayloadPath(ng, fmt.Appendf(nil, "pod %d", i)); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if e.Service, err = state.ServicePayloadPath("default", fmt.Sprintf("svc-%04d", i), fmt.Appendf(nil, "svc %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := ix.Set(k, e); err != nil {
			t.Fatal(err)
		}
		entries[k.String()] = e
	}
	good := ix.Encode()
	if _, err := state.DecodeIndex(good); err != nil {
		t.Fatal(err)
	}
	far := entries["ng08/app-0998"]
	nonHex := func(p string) string {
		i := strings.Index(p, "sha512/") + len("sha512/")
		return p[:i] + "g" + p[i+1:]
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"digest with a non-hex character", entries["ng03/app-0503"].Pod, nonHex(entries["ng03/app-0503"].Pod), "lowercase hexadecimal"},
		{"Pod path of another NodeGroup", entries["ng05/app-0505"].Pod, strings.Replace(entries["ng05/app-0505"].Pod, "/ng05/", "/ng06/", 1),
			`deployment "ng05/app-0505": Pod path`},
		{"Service owned twice", entries["ng00/app-0000"].Service, far.Service, `both own Service "default/svc-0998"`},
		{"reserved NodeGroup", "\"ng00/app-0000\": {\n    \"pod\": \"nodegroups/ng00/", "\"all/app-0000\": {\n    \"pod\": \"nodegroups/all/",
			`invalid NodeGroup ID "all"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Replace(good, []byte(tc.old), []byte(tc.new), 1)
			if bytes.Equal(bad, good) {
				t.Fatal("the damage changed nothing")
			}
			ctx := context.Background()
			b := newLocal(t)
			if _, err := b.Put(ctx, state.IndexPath, bad); err != nil {
				t.Fatal(err)
			}
			_, err := state.NewCommitter(b, state.CommitOptions{}).Deploy(ctx, deployment("ng01", "web", "default", "hello:v1", ""))
			if !errors.Is(err, state.ErrInvalidIndex) {
				t.Fatalf("deploy into an index with a damaged entry: %v, want ErrInvalidIndex", err)
			}
			checkErr(t, "deploy", err, tc.want)
			obj, err := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
			if err != nil || !bytes.Equal(obj.Data, bad) {
				t.Fatalf("the damaged index was changed (%v)", err)
			}
		})
	}
}
