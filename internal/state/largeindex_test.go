// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"bytes"
	"context"
	"errors"
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
	ix := bigIndex(t, 1000, 10)
	entry := func(k string) state.Entry {
		key, err := state.ParseKey(k)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := ix.Lookup(key)
		if !ok {
			t.Fatalf("no entry %s", k)
		}
		return e
	}
	good := ix.Encode()
	if _, err := state.DecodeIndex(good); err != nil {
		t.Fatal(err)
	}
	far := entry("ng8/app-00998")
	nonHex := func(p string) string {
		i := strings.Index(p, "sha512/") + len("sha512/")
		return p[:i] + "g" + p[i+1:]
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"digest with a non-hex character", entry("ng3/app-00503").Pod, nonHex(entry("ng3/app-00503").Pod), "lowercase hexadecimal"},
		{"Pod path of another NodeGroup", entry("ng5/app-00505").Pod, strings.Replace(entry("ng5/app-00505").Pod, "/ng5/", "/ng6/", 1),
			`deployment "ng5/app-00505": Pod path`},
		{"Service owned twice", entry("ng0/app-00000").Service, far.Service, `both own Service "default/svc-00998"`},
		{"reserved NodeGroup", "\"ng0/app-00000\": {\n    \"pod\": \"nodegroups/ng0/", "\"all/app-00000\": {\n    \"pod\": \"nodegroups/all/",
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
			_, err := state.NewCommitter(b, state.CommitOptions{}).Deploy(ctx, deployment("ng1", "web", "default", "hello:v1", ""))
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
