// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/state"
)

// caCluster is a local bucket with deployment web and a data directory
// holding the workload CA key (and no cluster CA).
func caCluster(t *testing.T) (*localstore.Bucket, string) {
	t.Helper()
	dir := t.TempDir()
	bucket := localstore.Open(filepath.Join(dir, "bucket"))
	if err := bucket.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	key, err := pki.GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := secrets.InternalSecret("demo", secrets.WorkloadCAKey)
	if err := secretslocal.New(filepath.Join(data, "secrets")).Create(context.Background(), name, secrets.Value(key)); err != nil {
		t.Fatal(err)
	}
	commit(t, bucket, "web", "hello:v1", false)
	return bucket, data
}

func caConfig(b *localstore.Bucket) Config {
	return Config{Provider: "local", Bucket: b.Dir(), Region: "local", Cluster: "demo", NodeGroup: "workers",
		IPv6Prefix: netip.MustParsePrefix("2001:db8:abc:de00:1234::/80")}
}

func hasCA(t *testing.T, b objstore.Store) bool {
	t.Helper()
	_, err := b.Get(context.Background(), state.IdentityCAPath, objstore.GetOptions{})
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func lease(t *testing.T, b objstore.Store) election.Record {
	t.Helper()
	obj, err := b.Get(context.Background(), election.Key, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var r election.Record
	if err := json.Unmarshal(obj.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Only the elected agent creates identity/ca.json: a one-shot pass
// creates it only when it wins the lease for its pass (it was vacant),
// then resigns; while another agent holds the lease it creates nothing,
// and its Pods wait for the leader's CA.
func TestOncePassCreatesTheWorkloadCAOnlyWhenElected(t *testing.T) {
	t.Run("another agent leads", func(t *testing.T) {
		b, data := caCluster(t)
		held, _ := json.Marshal(election.Record{LeaderID: "node-7", LeaderAddr: "[2001:db8::7]:8081", LastUpdated: time.Now().UTC(), Term: 4})
		if _, err := b.Put(context.Background(), election.Key, held); err != nil {
			t.Fatal(err)
		}
		logs := &logBuffer{}
		err := Run(context.Background(), caConfig(b), Options{Root: filepath.Join(t.TempDir(), "root"), DataDir: data, Once: true, Settings: coordinator.Settings{NodeID: "node-1"},
			Log: slog.New(slog.NewTextHandler(logs, nil))})
		if err == nil || !strings.Contains(err.Error(), "the elected leader creates it") {
			t.Fatalf("pass: %v, want the Pod held for want of the leader's CA\n%s", err, logs)
		}
		if hasCA(t, b) {
			t.Fatal("a one-shot pass created identity/ca.json while another agent leads")
		}
		if r := lease(t, b); r.LeaderID != "node-7" || r.Term != 4 {
			t.Fatalf("the lease changed: %+v", r)
		}
	})
	t.Run("the lease is vacant", func(t *testing.T) {
		b, data := caCluster(t)
		root := filepath.Join(t.TempDir(), "root")
		if err := Run(context.Background(), caConfig(b), Options{Root: root, DataDir: data, Once: true, Settings: coordinator.Settings{NodeID: "node-1"}}); err != nil {
			t.Fatal(err)
		}
		if !hasCA(t, b) || !fileContains(filepath.Join(root, "etc", "podmin", "manifests", "web.yaml"), "identity-revision") {
			t.Fatal("the elected one-shot pass did not create the CA and the Pod's identity")
		}
		if r := lease(t, b); r.LeaderID != "" || r.Term != 1 {
			t.Fatalf("the pass did not resign its lease: %+v", r)
		}
	})
}

// An agent that takes no part in the election (no cluster CA, so no
// coordination) never creates identity/ca.json.
func TestAgentWithoutCoordinationNeverCreatesTheWorkloadCA(t *testing.T) {
	b, data := caCluster(t)
	a := &localAgent{bucket: b, root: filepath.Join(t.TempDir(), "root"), logs: &logBuffer{}}
	a.run(t, context.Background(), caConfig(b), Options{Root: a.root, HealthAddr: "127.0.0.1:0", PollInterval: 20 * time.Millisecond, DataDir: data})
	waitFor(t, 10*time.Second, "a pass that needed the CA", func() bool {
		_, body := a.get(t, "/readyz")
		return strings.Contains(body, "the elected leader creates it")
	})
	if hasCA(t, b) {
		t.Fatal("an agent without coordination created identity/ca.json")
	}
}
