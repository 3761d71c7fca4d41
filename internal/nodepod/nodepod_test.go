// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package nodepod_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

func extract(t *testing.T, data []byte) (*manifest.Result, state.Entry) {
	t.Helper()
	ex, err := manifest.Extract(data, manifest.ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := state.Entry{}
	if e.Pod, err = state.PodPayloadPath(ex.NodeGroup, ex.PodYAML); err != nil {
		t.Fatal(err)
	}
	if ex.Service != nil {
		e.Service, _ = state.ServicePayloadPath(ex.Namespace, ex.Service.Name, ex.ServiceYAML)
	}
	return ex, e
}

func TestTransform(t *testing.T) {
	data, err := manifest.Build(manifest.BuildOptions{
		Name: "web", NodeGroup: "workers", Namespace: "product", Images: []string{"web=hello:v1", "side=side:v1"},
		Secrets: []string{"db-url", "token"}, SecretsProvider: "aws-parameter-store",
	})
	if err != nil {
		t.Fatal(err)
	}
	ex, e := extract(t, data)
	k, _ := state.NewKey("workers", "web")
	p, err := nodepod.Transform(k, e, ex.PodYAML)
	if err != nil {
		t.Fatal(err)
	}
	if p.File != "web.yaml" || p.Namespace != "product" || p.IdentityHostDir != "/run/podmin/workloads/web/identity" {
		t.Fatalf("%+v", p)
	}
	if len(p.Mounts) != 1 || p.Mounts[0].HostDir != "/run/podmin/workloads/web/secrets/aws-parameter-store" || strings.Join(p.Mounts[0].Keys, ",") != "db-url,token" {
		t.Fatalf("mounts %+v", p.Mounts)
	}
	y := string(p.YAML)
	for _, want := range []string{
		"podmin.dev/revision: " + p.Revision, "podmin.dev/aws-parameter-store: db-url,token",
		"- mountPath: /var/run/podmin/aws-parameter-store\n      name: podmin-aws-parameter-store\n      readOnly: true",
		"path: /run/podmin/workloads/web/secrets/aws-parameter-store\n      type: Directory\n    name: podmin-aws-parameter-store",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("lacks %q:\n%s", want, y)
		}
	}
	if strings.Count(y, "mountPath: /var/run/podmin/aws-parameter-store") != 2 || strings.Contains(y, "status") || strings.Contains(y, "null") {
		t.Errorf("want the mount in both containers, no status, no nulls:\n%s", y)
	}
	again, _ := nodepod.Transform(k, e, ex.PodYAML)
	if !bytes.Equal(again.YAML, p.YAML) {
		t.Fatal("transformation is not deterministic")
	}

	// The revision follows the payload digests and nothing else.
	withSvc := e
	withSvc.Service, _ = state.ServicePayloadPath("product", "web", []byte("svc"))
	if nodepod.Revision(withSvc) == p.Revision || nodepod.Revision(e) != p.Revision || len(p.Revision) != 32 {
		t.Fatal("revision does not depend on the Service payload")
	}
}

func TestTransformRejects(t *testing.T) {
	k, _ := state.NewKey("workers", "web")
	base := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n%s\nspec:\n  containers:\n  - image: x\n    name: web\n%s"
	tests := []struct {
		name, meta, extra, wantErr string
	}{
		{"other name", "", "", ""},
		{"not a Pod", "", "", "not a v1 Pod"},
		{"unknown field", "", "  bogus: 1\n", "decode"},
		{"revision forged", "  annotations:\n    podmin.dev/revision: x", "", "reserved annotation podmin.dev/revision"},
		{"bad keys", "  annotations:\n    podmin.dev/local: a,,b", "", "annotation podmin.dev/local"},
		{"volume clash", "  annotations:\n    podmin.dev/local: a", "  volumes:\n  - name: podmin-local\n    emptyDir: {}\n", "volume name \"podmin-local\" is reserved"},
		{"mount clash", "  annotations:\n    podmin.dev/local: a", "    volumeMounts:\n    - name: x\n      mountPath: /var/run/podmin/local/a\n", "overlaps /var/run/podmin/local"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(strings.Replace(base, "%s", tc.meta, 1), "%s", tc.extra, 1)
			switch tc.name {
			case "other name":
				y, tc.wantErr = strings.Replace(y, "name: web\n", "name: api\n", 1), `names Pod "api", not "web"`
			case "not a Pod":
				y = strings.Replace(y, "kind: Pod", "kind: Service", 1)
			}
			e := state.Entry{}
			e.Pod, _ = state.PodPayloadPath("workers", []byte(y))
			_, err := nodepod.Transform(k, e, []byte(y))
			if !errors.Is(err, nodepod.ErrInvalidPayload) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A deployment's second static Pod has a name no DaemonSet can have, and
// is the deployment's own Pod in everything but that name.
func TestSecondName(t *testing.T) {
	if got := nodepod.SecondName("web"); got != "web.surge" || nodepod.FirstName(got) != "web" || nodepod.FirstName("web") != "web" {
		t.Fatalf("SecondName(web) = %q, FirstName of it %q", got, nodepod.FirstName(got))
	}
	k, _ := state.NewKey("workers", "web")
	e := state.Entry{Pod: "nodegroups/workers/pods/sha512/" + strings.Repeat("a", 128) + ".yaml"}
	p, err := nodepod.Transform(k, e, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    podmin.dev/local: token\nspec:\n  containers:\n  - name: web\n    image: registry.podmin.internal/apps/hello:v1\n"))
	if err != nil {
		t.Fatal(err)
	}
	renamed, err := nodepod.Rename(p.YAML, nodepod.SecondName("web"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(p.YAML), "\n  name: web\n", "\n  name: web.surge\n", 1)
	if string(renamed) != want {
		t.Fatalf("renamed:\n%s\nwant:\n%s", renamed, want)
	}
	if _, err := nodepod.Rename([]byte("not: [yaml"), "x"); err == nil {
		t.Fatal("a file that does not decode was renamed")
	}
}
