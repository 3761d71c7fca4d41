// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/state"
)

// clusterEnv is a connected local cluster "demo" with the local secrets
// store.
type clusterEnv struct {
	*builtins.Env
	secrets *localsecrets.Store
	bucket  *localstore.Bucket
}

func newClusterEnv(t *testing.T, connect bool) *clusterEnv {
	t.Helper()
	ce := &clusterEnv{Env: testEnv(t)}
	ce.secrets = localsecrets.New(filepath.Join(ce.Dirs.Data, "secrets"))
	ce.Secrets = func(_ context.Context, _ contexts.Context, provider string) (secrets.Store, error) {
		if provider != secrets.Local {
			t.Errorf("CA secrets of a local cluster opened in %s", provider)
		}
		return ce.secrets, nil
	}
	ce.bucket = localstore.Open(ce.Providers["local"].(local.Provider).Dir("demo-bucket"))
	if connect {
		if _, err := ce.Connect(t.Context(), builtins.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo-bucket"}); err != nil {
			t.Fatal(err)
		}
	}
	return ce
}

func (ce *clusterEnv) secret(t *testing.T, key string) (secrets.Value, bool) {
	t.Helper()
	n, err := secrets.InternalSecret("demo", key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ce.secrets.Read(t.Context(), n)
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

func (ce *clusterEnv) config(t *testing.T) (lifecycle.ClusterConfig, bool) {
	t.Helper()
	obj, err := ce.bucket.Get(t.Context(), state.TFVarsPath, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return lifecycle.ClusterConfig{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var cfg lifecycle.ClusterConfig
	if err := json.Unmarshal(obj.Data, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, true
}

func TestLocalSetupStoresSecretsAndPublishesConfig(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	res, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default", "workers,size=2"},
		WorkloadCAPublish: "s3://trust-bucket/ca.pem", OtelLogs: "mtls=true,endpoint=https://otel.example.com/v1/logs,protocol=http"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || !res.ConfigChanged || len(res.Secrets) != 2 || res.Secrets[0].Action != "created" || res.Secrets[1].Action != "created" {
		t.Fatalf("result %+v", res)
	}
	// The workload CA key is a 32-byte Ed25519 seed.
	key, ok := ce.secret(t, secrets.WorkloadCAKey)
	if !ok {
		t.Fatal("no workload CA key")
	}
	seed, err := base64.StdEncoding.DecodeString(string(key))
	if err != nil || len(seed) != ed25519.SeedSize {
		t.Fatalf("workload CA key is %d bytes (%v), want a base64 32-byte seed", len(seed), err)
	}
	// The cluster CA is a CA certificate and its matching private key.
	ca, ok := ce.secret(t, secrets.ClusterCA)
	if !ok {
		t.Fatal("no cluster CA")
	}
	parsed, err := pki.ParseClusterCA(ca, "demo")
	if err != nil || !parsed.Cert.IsCA || parsed.Cert.CheckSignatureFrom(parsed.Cert) != nil ||
		!parsed.Key.Public().(ed25519.PublicKey).Equal(parsed.Cert.PublicKey) {
		t.Fatalf("cluster CA is not a self-signed CA with its matching key: %v", err)
	}
	cfg, ok := ce.config(t)
	if !ok || cfg.ID != "demo" || len(cfg.NodeGroups) != 2 || cfg.NodeGroups[1].Size != 2 || cfg.WorkloadCAPublish.String() != "s3://trust-bucket/ca.pem" ||
		cfg.OtelLogs != "endpoint=https://otel.example.com/v1/logs,mtls=true" {
		t.Fatalf("published configuration %+v", cfg)
	}
	if len(res.LocalAgents) != 3 || !strings.Contains(res.LocalAgents[2].Command, "--nodegroup workers --ipv6-prefix 2001:db8:0:2:2::/80") ||
		!strings.Contains(res.LocalAgents[0].Command, "--bucket "+ce.bucket.Dir()) {
		t.Fatalf("local agents %+v", res.LocalAgents)
	}
	// Each agent on the one machine has its own root, node ID and node
	// address, and takes free ports: no fixed port of one cluster's
	// agents can collide with another cluster's.
	seen := map[string]bool{}
	for _, a := range res.LocalAgents {
		for _, f := range strings.Fields(a.Command) {
			k, v, _ := strings.Cut(f, "=")
			switch {
			case strings.HasSuffix(k, "_ADDR") && k != "PODMIN_AGENT_NODE_ADDR":
				if !strings.HasSuffix(v, ":0") {
					t.Errorf("%s is a fixed port, which another cluster's agents on this machine may take too:\n%s", f, a.Command)
				}
			case strings.HasPrefix(k, "PODMIN_"):
				if seen[f] {
					t.Fatalf("two local agents share %s:\n%+v", f, res.LocalAgents)
				}
				seen[f] = true
			}
		}
	}
	if len(seen) != 3*len(res.LocalAgents) {
		t.Fatalf("local agents without a root, node ID and address of their own: %+v", res.LocalAgents)
	}

	// A second setup keeps both secrets (create-only) and the configuration.
	res2, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default", "workers,size=2"},
		WorkloadCAPublish: "s3://trust-bucket/ca.pem", OtelLogs: "endpoint=https://otel.example.com/v1/logs,mtls=true"})
	if err != nil {
		t.Fatal(err)
	}
	if res2.ConfigChanged || res2.Secrets[0].Action != "kept" || res2.Secrets[1].Action != "kept" {
		t.Fatalf("second setup %+v", res2)
	}
	if again, _ := ce.secret(t, secrets.WorkloadCAKey); string(again) != string(key) {
		t.Fatal("the workload CA key changed on a second setup")
	}
}

func TestSetupWritesNothingUntilValidAndConfirmed(t *testing.T) {
	ce := newClusterEnv(t, true)
	_, err := ce.Setup(t.Context(), lifecycle.SetupOptions{NodeGroup: []string{"default", "workers,size=-2"}})
	if !errors.Is(err, lifecycle.ErrInvalidSetup) {
		t.Fatalf("bad size: %v", err)
	}
	refused := errors.New("refused")
	var shown lifecycle.PlanSummary
	_, err = ce.Setup(t.Context(), lifecycle.SetupOptions{NodeGroup: []string{"default"},
		Confirm: func(p lifecycle.PlanSummary) error { shown = p; return refused }})
	if !errors.Is(err, refused) || len(shown.Steps) != 3 {
		t.Fatalf("refused confirmation: %v, plan %+v", err, shown)
	}
	if _, ok := ce.secret(t, secrets.WorkloadCAKey); ok {
		t.Error("a secret was written")
	}
	if _, ok := ce.config(t); ok {
		t.Error("the configuration was published")
	}
}

func TestLocalTeardownKeepsBucketSecretsAndContext(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.bucket.Put(ctx, state.IdentityCAPath, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	res, err := ce.Teardown(ctx, lifecycle.TeardownOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Destroy != 1 {
		t.Errorf("plan %+v", res.Plan)
	}
	if _, ok := ce.config(t); ok {
		t.Error("the configuration is still published")
	}
	for _, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		if _, ok := ce.secret(t, k); !ok {
			t.Errorf("teardown removed %s", k)
		}
	}
	if _, err := ce.bucket.Head(ctx, state.IdentityCAPath); err != nil {
		t.Errorf("teardown removed the public workload CA state: %v", err)
	}
	if _, err := ce.CurrentContext(); err != nil {
		t.Errorf("teardown removed the context: %v", err)
	}
	// Teardown is repeatable.
	if _, err := ce.Teardown(ctx, lifecycle.TeardownOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestLocalDestroyRemovesEverythingItOwns(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{state.IndexPath, "apps/hello/oci-layout", state.IdentityCAPath} {
		if _, err := ce.bucket.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	var shown lifecycle.PlanSummary
	res, err := ce.Destroy(ctx, lifecycle.DestroyOptions{Confirm: func(p lifecycle.PlanSummary) error { shown = p; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.BucketDeleted || !res.ContextRemoved || res.ObjectsDeleted != 3 || len(shown.Steps) != 5 {
		t.Fatalf("result %+v, plan %+v", res, shown)
	}
	for i, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		want := "destroy CA secret /demo/_system/" + k + " (created by this context)"
		if shown.Steps[1+i] != want || res.Secrets[i].Action != "destroyed" {
			t.Errorf("CA secret %s: plan step %q, result %+v; want %q, destroyed", k, shown.Steps[1+i], res.Secrets[i], want)
		}
	}
	if _, err := os.Stat(ce.bucket.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bucket directory remains: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(ce.bucket.Dir())); len(entries) != 0 {
		t.Errorf("debris beside the bucket: %v", entries)
	}
	for _, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		if _, ok := ce.secret(t, k); ok {
			t.Errorf("destroy kept %s", k)
		}
	}
	if _, err := ce.CurrentContext(); err == nil {
		t.Error("the context remains current")
	}
	if list, _ := ce.ListContexts(); len(list) != 0 {
		t.Errorf("contexts remain: %+v", list)
	}
}

// userFile is an operator's own object in a bucket Podmin did not create.
const userFile = "notes/keep-me.txt"

// A bucket connect found existing is never deleted, whatever its tags
// say: not when it was untagged, not when someone forged Podmin's tags into
// it after connect, not when it carried them before connect (connect does
// not even report it as owned). Destroy removes the infrastructure, the CA
// secrets and Podmin's objects, lists them in the plan, and keeps the
// bucket with every other file.
func TestDestroyKeepsABucketPodminDidNotCreate(t *testing.T) {
	forged := map[string]string{builtins.ClusterTag: "demo", contexts.BucketNonceTag: contexts.NewNonce()}
	for _, tc := range []struct {
		name                 string
		before, afterConnect map[string]string
	}{
		{"untagged", nil, nil},
		{"forged tags", nil, forged},
		{"pre-tagged", map[string]string{builtins.ClusterTag: "demo"}, nil},
		{"pre-tagged with a nonce", forged, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := newClusterEnv(t, false)
			ctx := t.Context()
			// An operator's existing directory with a file of their own.
			if err := os.MkdirAll(filepath.Join(ce.bucket.Dir(), "notes"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ce.bucket.Dir(), userFile), []byte("mine"), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				if err := ce.bucket.CreateBucket(ctx); err != nil && !errors.Is(err, objstore.ErrBucketExists) {
					t.Fatal(err)
				}
				if err := ce.bucket.SetBucketTags(ctx, tc.before); err != nil {
					t.Fatal(err)
				}
			}
			cres, err := ce.Connect(ctx, builtins.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo-bucket"})
			if err != nil {
				t.Fatal(err)
			}
			if cres.BucketCreated || cres.BucketOwned || cres.Context.BucketNonce != "" {
				t.Fatalf("connect claimed an existing directory: %+v", cres)
			}
			if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
				t.Fatal(err)
			}
			statusPath, _ := state.NodeGroupStatusPath("default")
			for _, k := range []string{state.IndexPath, statusPath} {
				if _, err := ce.bucket.Put(ctx, k, []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			if tc.afterConnect != nil {
				if err := ce.bucket.SetBucketTags(ctx, tc.afterConnect); err != nil {
					t.Fatal(err)
				}
			}
			var shown lifecycle.PlanSummary
			res, err := ce.Destroy(ctx, lifecycle.DestroyOptions{Confirm: func(p lifecycle.PlanSummary) error { shown = p; return nil }})
			if err != nil {
				t.Fatal(err)
			}
			step := shown.Steps[len(shown.Steps)-2]
			if !strings.HasPrefix(step, "keep bucket demo-bucket, which existed before connect") ||
				!strings.HasSuffix(step, "delete Podmin's 3 objects: tfstate/ (1), deployments/ (1), status/ (1)") {
				t.Errorf("plan step %q", step)
			}
			// The configuration is withdrawn with the (local) infrastructure,
			// the index with the bucket's Podmin objects.
			if res.BucketDeleted || !res.BucketKept || res.ObjectsDeleted != 2 || !res.ContextRemoved {
				t.Errorf("result %+v", res)
			}
			if data, err := os.ReadFile(filepath.Join(ce.bucket.Dir(), userFile)); err != nil || string(data) != "mine" {
				t.Fatalf("the operator's file is gone: %q %v", data, err)
			}
			for _, k := range []string{state.TFVarsPath, state.IndexPath, statusPath} {
				if _, err := ce.bucket.Head(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
					t.Errorf("Podmin's object %s remains: %v", k, err)
				}
			}
		})
	}
}

// A bucket Podmin created is deleted only while it carries the nonce the
// context recorded: tags replaced or copied onto a replacement stop
// destroy before anything is deleted.
func TestDestroyRefusesUnprovenBucket(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags func(nonce string) map[string]string
		want string
	}{
		{"tags removed", func(string) map[string]string { return map[string]string{} },
			`no proof of ownership: bucket "demo-bucket" does not carry the podmin:create-nonce this context recorded when connect created it (the bucket was replaced or its tags were changed), so Podmin cannot prove it is the bucket it created; nothing was deleted: check the bucket, then delete it yourself if it should go and run "podmin disconnect demo"`},
		{"cluster tag only", func(string) map[string]string { return map[string]string{builtins.ClusterTag: "demo"} }, "does not carry the podmin:create-nonce"},
		{"another nonce", func(string) map[string]string {
			return map[string]string{builtins.ClusterTag: "demo", contexts.BucketNonceTag: contexts.NewNonce()}
		}, "does not carry the podmin:create-nonce"},
		{"nonce under another cluster", func(n string) map[string]string {
			return map[string]string{builtins.ClusterTag: "prod", contexts.BucketNonceTag: n}
		}, `no proof of ownership: bucket "demo-bucket" is tagged podmin:cluster=prod, another cluster's, so this cluster will not delete it; nothing was deleted: destroy it from a context of cluster "prod", or run "podmin disconnect demo" to forget this context`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := newClusterEnv(t, true)
			ctx := t.Context()
			c, err := ce.CurrentContext()
			if err != nil || len(c.BucketNonce) != 64 {
				t.Fatalf("connect recorded no nonce for the bucket it created: %+v %v", c, err)
			}
			if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
				t.Fatal(err)
			}
			if err := ce.bucket.SetBucketTags(ctx, tc.tags(c.BucketNonce)); err != nil {
				t.Fatal(err)
			}
			asked := false
			_, err = ce.Destroy(ctx, lifecycle.DestroyOptions{Confirm: func(lifecycle.PlanSummary) error { asked = true; return nil }})
			if !errors.Is(err, lifecycle.ErrNotOwned) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("destroy error\n got %v\nwant %s", err, tc.want)
			}
			if asked {
				t.Error("confirmation was asked before the ownership check")
			}
			if _, ok := ce.config(t); !ok {
				t.Error("the configuration was deleted")
			}
			for _, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
				if _, ok := ce.secret(t, k); !ok {
					t.Errorf("%s was deleted", k)
				}
			}
			if _, err := ce.CurrentContext(); err != nil {
				t.Errorf("the context was removed: %v", err)
			}
		})
	}
}

func TestTeardownRefusesAnotherClustersState(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	// The bucket tagged for another cluster.
	if err := ce.bucket.SetBucketTags(ctx, map[string]string{builtins.ClusterTag: "prod"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.Teardown(ctx, lifecycle.TeardownOptions{}); !errors.Is(err, lifecycle.ErrNotOwned) ||
		err.Error() != `no proof of ownership: bucket "demo-bucket" is tagged podmin:cluster=prod, another cluster's: nothing was changed` {
		t.Fatalf("foreign bucket: %v", err)
	}
	// A configuration published by another cluster.
	if err := ce.bucket.SetBucketTags(ctx, map[string]string{builtins.ClusterTag: "demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.bucket.Put(ctx, state.TFVarsPath, []byte(`{"version":1,"cluster":"prod","nodegroups":[]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.Teardown(ctx, lifecycle.TeardownOptions{}); !errors.Is(err, lifecycle.ErrNotOwned) ||
		err.Error() != `no proof of ownership: the cluster configuration tfstate/podmin.auto.tfvars.json names cluster "prod", not "demo": nothing was changed` {
		t.Fatalf("foreign configuration: %v", err)
	}
	if _, err := ce.bucket.Head(ctx, state.TFVarsPath); err != nil {
		t.Fatalf("the foreign configuration was deleted: %v", err)
	}
	// Setup never replaces another cluster's configuration either.
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); !errors.Is(err, lifecycle.ErrNotOwned) ||
		!strings.Contains(err.Error(), `belongs to cluster "prod", not "demo"`) {
		t.Fatalf("setup over a foreign configuration: %v", err)
	}
	if obj, err := ce.bucket.Get(ctx, state.TFVarsPath, objstore.GetOptions{}); err != nil || !strings.Contains(string(obj.Data), `"cluster":"prod"`) {
		t.Fatalf("setup replaced the foreign configuration: %s %v", obj.Data, err)
	}
}

// failingSecrets fails Destroy while fail is set.
type failingSecrets struct {
	secrets.NonceStore
	fail bool
}

func (f *failingSecrets) Destroy(ctx context.Context, n secrets.Name) error {
	if f.fail {
		return errors.New("connection reset")
	}
	return f.NonceStore.Destroy(ctx, n)
}

// failingContexts fails Update while fail is set.
type failingContexts struct {
	builtins.ContextsFile
	fail bool
}

func (f *failingContexts) Update(fn func(*contexts.File) error) error {
	if f.fail {
		return errors.New("disk full")
	}
	return f.ContextsFile.Update(fn)
}

func TestInterruptedDestroyRunsToCompletion(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	fs := &failingSecrets{NonceStore: ce.secrets, fail: true}
	ce.Secrets = func(context.Context, contexts.Context, string) (secrets.Store, error) { return fs, nil }
	fc := &failingContexts{ContextsFile: builtins.ConfigContexts{Dir: ce.Dirs.Config}}
	ce.Contexts = fc

	// Interrupted while destroying the secrets: the bucket and context stay.
	if _, err := ce.Destroy(ctx, lifecycle.DestroyOptions{}); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("first destroy: %v", err)
	}
	if exists, _ := ce.bucket.BucketExists(ctx); !exists {
		t.Fatal("the bucket was deleted although an earlier step failed")
	}
	// Interrupted after deleting the bucket, before removing the context.
	fs.fail, fc.fail = false, true
	res, err := ce.Destroy(ctx, lifecycle.DestroyOptions{})
	if err == nil || !res.BucketDeleted || res.ContextRemoved {
		t.Fatalf("second destroy: %+v %v", res, err)
	}
	// The re-run finds the bucket gone and finishes.
	fc.fail = false
	res, err = ce.Destroy(ctx, lifecycle.DestroyOptions{})
	if err != nil || res.BucketDeleted || !res.ContextRemoved || res.Secrets[0].Action != "absent" {
		t.Fatalf("third destroy: %+v %v", res, err)
	}
	if _, err := ce.CurrentContext(); err == nil {
		t.Error("the context remains")
	}
}

// Destroy keeps the secrets of the cluster's Pods, which it cannot prove
// this context created, and lists every one in its plan and result, with
// the command that deletes it: on AWS a later cluster of the same name
// would mount them.
func TestDestroyListsTheSecretsItKeeps(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []builtins.SecretOptions{
		{Key: "token", For: "web"},
		{Key: "password", For: "db", Namespace: "data"},
		{Key: secrets.OtelLogsHeaders, System: true},
	} {
		if _, err := ce.CreateSecret(ctx, builtins.SecretValueOptions{SecretOptions: o, Value: secrets.Value("a value of the cluster")}); err != nil {
			t.Fatal(err)
		}
	}
	var shown lifecycle.PlanSummary
	res, err := ce.Destroy(ctx, lifecycle.DestroyOptions{Confirm: func(p lifecycle.PlanSummary) error { shown = p; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/demo/default/web/token":                  `"podmin secret destroy token --for web -n default --provider local -y"`,
		"/demo/data/db/password":                   `"podmin secret destroy password --for db -n data --provider local -y"`,
		"/demo/_system/" + secrets.OtelLogsHeaders: `"podmin secret destroy otel-logs-headers --system --provider local -y"`,
	}
	kept := map[string]string{}
	for _, a := range res.Secrets {
		if a.Action == "kept" {
			kept[a.Name] = a.Reason
		}
	}
	plan := strings.Join(shown.Steps, "\n")
	for name, cmd := range want {
		if r := kept[name]; !strings.Contains(r, "destroy deletes only secrets it can prove this context created") || !strings.Contains(r, cmd) {
			t.Errorf("result for %s: %q, want it kept with %s", name, r, cmd)
		}
		if !strings.Contains(plan, "keep secret "+name+": ") {
			t.Errorf("the plan does not list %s:\n%s", name, plan)
		}
	}
	if len(kept) != len(want) {
		t.Errorf("kept %v, want %d secrets", kept, len(want))
	}
	// They are kept indeed.
	for _, o := range []builtins.SecretOptions{{Key: "token", For: "web"}, {Key: "password", For: "db", Namespace: "data"}} {
		n, err := secrets.PodSecret("demo", o.Namespace, o.For, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ce.secrets.Read(ctx, n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// A secrets provider that cannot be listed leaves what it holds unknown:
// destroy says so, never that there is nothing to keep.
func TestDestroySaysWhenItCannotListSecrets(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	ce.Secrets = func(_ context.Context, _ contexts.Context, provider string) (secrets.Store, error) {
		return unlistable{ce.secrets}, nil
	}
	res, err := ce.Destroy(ctx, lifecycle.DestroyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Secrets[len(res.Secrets)-1]
	if last.Name != "/demo/ in local" || last.Action != "unknown" || !strings.Contains(last.Reason, "listing it failed (access denied)") {
		t.Fatalf("secrets %+v", res.Secrets)
	}
}

// unlistable is a secrets store whose listing is refused.
type unlistable struct{ *localsecrets.Store }

func (unlistable) List(context.Context, string, secrets.Filter) ([]secrets.Entry, error) {
	return nil, errors.New("access denied")
}
