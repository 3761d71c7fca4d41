// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/state"
)

var (
	zeros     = strings.Repeat("0", 128)
	ones      = strings.Repeat("1", 128)
	specPod   = "nodegroups/workers/pods/sha512/" + zeros + ".yaml"
	specSvc   = "services/product/frontend/sha512/" + ones + ".yaml"
	specIndex = `{
  "workers/web": {
    "pod": "` + specPod + `",
    "service": "` + specSvc + `"
  }
}
`
)

// TestSpecExampleRoundTrip decodes the specification's example and encodes
// it back byte for byte.
func TestSpecExampleRoundTrip(t *testing.T) {
	ix, err := state.DecodeIndex([]byte(specIndex))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := ix.Lookup(state.Key{NodeGroup: "workers", Name: "web"})
	if !ok || e.Pod != specPod || e.Service != specSvc {
		t.Fatalf("entry = %+v, %v", e, ok)
	}
	if got := string(ix.Encode()); got != specIndex {
		t.Fatalf("encode:\n%s\nwant:\n%s", got, specIndex)
	}
}

func TestEncodeGolden(t *testing.T) {
	ix := state.NewIndex()
	if got := string(ix.Encode()); got != "{}\n" {
		t.Fatalf("empty index encodes as %q", got)
	}
	set := func(key, pod, svc string) {
		t.Helper()
		k, err := state.ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := ix.Set(k, state.Entry{Pod: pod, Service: svc}); err != nil {
			t.Fatal(err)
		}
	}
	// Inserted out of order; "a-b/x" sorts before "a/x" in byte order.
	set("workers/web", specPod, specSvc)
	set("a/x", "nodegroups/a/pods/sha512/"+ones+".yaml", "")
	set("a-b/x", "nodegroups/a-b/pods/sha512/"+zeros+".yaml", "")
	want := `{
  "a-b/x": {
    "pod": "nodegroups/a-b/pods/sha512/` + zeros + `.yaml"
  },
  "a/x": {
    "pod": "nodegroups/a/pods/sha512/` + ones + `.yaml"
  },
  "workers/web": {
    "pod": "` + specPod + `",
    "service": "` + specSvc + `"
  }
}
`
	if got := string(ix.Encode()); got != want {
		t.Fatalf("encode:\n%s\nwant:\n%s", got, want)
	}
	// Free whitespace decodes to the same canonical bytes.
	compact := strings.Join(strings.Fields(want), "")
	again, err := state.DecodeIndex([]byte(compact))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Encode(), []byte(want)) {
		t.Fatalf("compact form re-encodes differently:\n%s", again.Encode())
	}
	var keys []string
	for _, it := range again.Items() {
		keys = append(keys, it.Key.String())
	}
	if strings.Join(keys, " ") != "a-b/x a/x workers/web" {
		t.Fatalf("Items order %v", keys)
	}
	if ng := again.NodeGroup("a"); len(ng) != 1 || ng[0].Key.Name != "x" {
		t.Fatalf("NodeGroup(a) = %v", ng)
	}
	owner, ok := again.ServiceOwner(state.ServiceID{Namespace: "product", Name: "frontend"})
	if !ok || owner.String() != "workers/web" {
		t.Fatalf("ServiceOwner = %v, %v", owner, ok)
	}
	if _, ok := again.ServiceOwner(state.ServiceID{Namespace: "default", Name: "frontend"}); ok {
		t.Fatal("ServiceOwner matched another namespace")
	}
}

func TestDecodeStrict(t *testing.T) {
	entry := func(key, body string) string { return `{"` + key + `": {` + body + `}}` }
	pod := `"pod": "` + specPod + `"`
	svc := `"service": "` + specSvc + `"`
	for _, tc := range []struct{ name, in, err string }{
		{"empty object", `{}`, ""},
		{"whitespace", " \n{ }\n\n", ""},
		{"pod only", entry("workers/web", pod), ""},
		{"not json", `nope`, "invalid character"},
		{"empty input", ``, "EOF"},
		{"array", `[]`, "the index must be a JSON object"},
		{"null", `null`, "the index must be a JSON object"},
		{"trailing data", `{}{}`, "unexpected data after the index object"},
		{"unknown field", entry("workers/web", pod+`, "digest": "x"`), `unknown field "digest": only "pod", "service" and "revisions" are allowed`},
		{"duplicate field", entry("workers/web", pod+", "+pod), `field "pod" appears twice`},
		{"duplicate key", `{"workers/web": {` + pod + `}, "workers/web": {` + pod + `}}`, `deployment "workers/web" appears twice`},
		{"missing pod", entry("workers/web", svc), `missing field "pod"`},
		{"empty service", entry("workers/web", pod+`, "service": ""`), `must be a non-empty path string (omit "service" when there is none)`},
		{"null pod", entry("workers/web", `"pod": null`), `field "pod" must be a non-empty path string`},
		{"numeric pod", entry("workers/web", `"pod": 1`), `field "pod" must be a non-empty path string`},
		{"entry not object", `{"workers/web": "x"}`, `deployment "workers/web" must be a JSON object`},
		{"key without slash", entry("web", pod), `invalid deployment key "web": expected <nodegroup>/<deployment>`},
		{"key with two slashes", entry("workers/web/x", pod), `invalid deployment name "web/x"`},
		{"uppercase key", entry("workers/Web", pod), `invalid deployment name "Web"`},
		{"pod in other nodegroup", entry("other/web", pod), `deployment "other/web": Pod path "` + specPod + `" belongs to NodeGroup "workers", not "other"`},
		{"pod path not canonical", entry("workers/web", `"pod": "nodegroups/workers/pods/sha512/abc.yaml"`), "is not a Pod payload path"},
		{"pod path uppercase digest", entry("workers/web", `"pod": "nodegroups/workers/pods/sha512/`+strings.Repeat("A", 128)+`.yaml"`), "lowercase hexadecimal"},
		{"service path not canonical", entry("workers/web", pod+`, "service": "services/product/sha512/`+ones+`.yaml"`), "is not a Service payload path"},
		{"service path is a pod path", entry("workers/web", pod+`, "service": "`+specPod+`"`), "is not a Service payload path"},
		{"service owned twice", `{"workers/web": {` + pod + `, ` + svc + `}, "workers/api": {` + pod + `, ` + svc + `}}`,
			`deployments "workers/web" and "workers/api" both own Service "product/frontend"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := state.DecodeIndex([]byte(tc.in))
			checkErr(t, "DecodeIndex", err, tc.err)
			if err != nil && !errors.Is(err, state.ErrInvalidIndex) {
				t.Errorf("error %v does not wrap ErrInvalidIndex", err)
			}
			if err != nil && !strings.Contains(err.Error(), "run \"podmin index rebuild\"") {
				t.Errorf("error %q does not say what to do", err)
			}
		})
	}
}

func TestIndexSetRules(t *testing.T) {
	ix := state.NewIndex()
	web := state.Key{NodeGroup: "workers", Name: "web"}
	api := state.Key{NodeGroup: "other", Name: "api"}
	e := state.Entry{Pod: specPod, Service: specSvc}
	if _, existed, err := ix.Set(web, e); err != nil || existed {
		t.Fatal(existed, err)
	}
	// Another NodeGroup cannot claim the same Service identity.
	_, _, err := ix.Set(api, state.Entry{Pod: "nodegroups/other/pods/sha512/" + ones + ".yaml", Service: "services/product/frontend/sha512/" + zeros + ".yaml"})
	checkErr(t, "Set(second owner)", err, `Service "product/frontend" is already owned by deployment "workers/web": delete that deployment first or rename the Service`)
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("error %v does not wrap ErrConflict", err)
	}
	// The owner may change its Service, which frees the old identity.
	moved := state.Entry{Pod: specPod, Service: "services/product/backend/sha512/" + ones + ".yaml"}
	if prev, existed, err := ix.Set(web, moved); err != nil || !existed || prev != e {
		t.Fatal(prev, existed, err)
	}
	if _, _, err := ix.Set(api, state.Entry{Pod: "nodegroups/other/pods/sha512/" + ones + ".yaml", Service: specSvc}); err != nil {
		t.Fatalf("freed identity not claimable: %v", err)
	}
	if prev, existed := ix.Remove(api); !existed || prev.Service != specSvc {
		t.Fatal(prev, existed)
	}
	if _, ok := ix.ServiceOwner(state.ServiceID{Namespace: "product", Name: "frontend"}); ok {
		t.Fatal("removed entry still owns its Service")
	}
	if _, existed := ix.Remove(api); existed {
		t.Fatal("second Remove found an entry")
	}
	_, _, err = ix.Set(web, state.Entry{Pod: "nodegroups/other/pods/sha512/" + ones + ".yaml"})
	checkErr(t, "Set(foreign pod path)", err, `belongs to NodeGroup "other", not "workers"`)
}

func FuzzDecodeIndex(f *testing.F) {
	f.Add([]byte(specIndex))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"a/b": {"pod": "x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := state.DecodeIndex(data)
		if err != nil {
			return
		}
		enc := ix.Encode()
		again, err := state.DecodeIndex(enc)
		if err != nil {
			t.Fatalf("canonical form of an accepted index is rejected: %v\n%s", err, enc)
		}
		if !bytes.Equal(again.Encode(), enc) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, again.Encode())
		}
	})
}
