// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package mounts_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
)

func podWith(ms ...nodepod.Mount) *nodepod.Pod {
	for i := range ms {
		ms[i].HostDir = nodepod.SecretsHostDir("web", ms[i].Provider)
	}
	return &nodepod.Pod{Name: "web", Namespace: "product", Mounts: ms}
}

func TestFetchAndWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := secretslocal.New(filepath.Join(dir, "secrets"))
	for key, v := range map[string]string{"a": "1", "b": "2", "undeclared": "x"} {
		n, _ := secrets.PodSecret("demo", "product", "web", key)
		if err := store.Create(ctx, n, secrets.Value(v)); err != nil {
			t.Fatal(err)
		}
	}
	readers := map[string]mounts.Reader{"local": mounts.StoreReader{Store: store}}
	root := filepath.Join(dir, "root")
	p := podWith(nodepod.Mount{Provider: "local", Keys: []string{"a", "b"}})
	v, err := mounts.Fetch(ctx, readers, "demo", p)
	if err != nil {
		t.Fatal(err)
	}
	if err := mounts.Write(root, p, v); err != nil {
		t.Fatal(err)
	}
	hostDir := filepath.Join(root, "run", "podmin", "workloads", "web", "secrets", "local")
	entries, _ := os.ReadDir(hostDir)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
		if info, _ := e.Info(); info.Mode().Perm() != 0o444 {
			t.Errorf("%s has mode %v", e.Name(), info.Mode())
		}
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("files %q: only declared keys are fetched and written", got)
	}

	// Dropping a key removes its file; dropping the provider its directory.
	p = podWith(nodepod.Mount{Provider: "local", Keys: []string{"b"}})
	if err := mounts.Write(root, p, mounts.Values{"local": {"b": secrets.Value("2")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped key: %v", err)
	}
	if err := mounts.Write(root, podWith(), mounts.Values{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(hostDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped provider: %v", err)
	}

	_, err = mounts.Fetch(ctx, readers, "demo", podWith(nodepod.Mount{Provider: "aws-secrets-manager", Keys: []string{"a"}}))
	if err == nil || !strings.Contains(err.Error(), "no aws-secrets-manager secrets provider configured") {
		t.Fatalf("unconfigured provider: %v", err)
	}
	_, err = mounts.Fetch(ctx, readers, "demo", podWith(nodepod.Mount{Provider: "local", Keys: []string{"missing"}}))
	if !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
}

// cliReader answers every read as a provider does for a missing value,
// with advice for the CLI's flags.
type cliReader struct{}

func (cliReader) Get(_ context.Context, name string) ([]byte, error) {
	return nil, fmt.Errorf("parameter-store: read %s: %w: check --for, --namespace and --provider: ParameterNotFound", name, secrets.ErrNotFound)
}

// The agent reports a missing value in the node's terms: the value's name,
// the Pod and namespace and the annotation; never the CLI's flags.
func TestMissingValueSpeaksOfTheNode(t *testing.T) {
	_, err := mounts.Fetch(context.Background(), map[string]mounts.Reader{"aws-parameter-store": cliReader{}}, "demo",
		podWith(nodepod.Mount{Provider: "aws-parameter-store", Keys: []string{"token"}}))
	if !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	msg := err.Error()
	for _, want := range []string{"/demo/product/web/token", "Pod web in namespace product", "podmin.dev/aws-parameter-store annotation"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "--") {
		t.Errorf("%q names command-line flags the agent does not have", msg)
	}
}
