// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
)

// caName is the full name of a CA secret of cluster demo.
func caName(t *testing.T, key string) secrets.Name {
	t.Helper()
	n, err := secrets.InternalSecret("demo", key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// validCAValues are CA secret values setup accepts as existing.
func validCAValues(t *testing.T) map[string][]byte {
	t.Helper()
	key, err := pki.GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.GenerateClusterCA(rand.Reader, "demo", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{secrets.WorkloadCAKey: key, secrets.ClusterCA: ca}
}

// keptSteps returns the plan's CA secret steps that keep a secret.
func keptSteps(p lifecycle.PlanSummary) []string {
	var out []string
	for _, s := range p.Steps {
		if strings.HasPrefix(s, "keep CA secret ") {
			out = append(out, s)
		}
	}
	return out
}

func TestSetupRecordsCANonceWithContextAndSecrets(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	c, err := ce.CurrentContext()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		got, err := ce.secrets.CreateNonce(ctx, caName(t, k))
		if err != nil || !contexts.ProvenBy(c.CANonce, got) {
			t.Fatalf("%s carries nonce %q (%v); the context records %q", k, got, err, c.CANonce)
		}
	}
	// Reconnecting keeps the proof, so destroy still covers the secrets.
	if _, err := ce.Connect(ctx, builtins.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo-bucket"}); err != nil {
		t.Fatal(err)
	}
	if again, _ := ce.CurrentContext(); again.CANonce != c.CANonce {
		t.Fatalf("reconnect changed the CA nonce from %q to %q", c.CANonce, again.CANonce)
	}
	res, err := ce.Destroy(ctx, lifecycle.DestroyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		if _, ok := ce.secret(t, k); ok || res.Secrets[i].Action != "destroyed" {
			t.Errorf("%s: still stored %v, result %+v", k, ok, res.Secrets[i])
		}
	}
}

// CA secrets that existed before setup (written by another tool, or by
// another context of a same-named cluster) are used, and destroy keeps
// them: their names prove nothing.
func TestLocalDestroyKeepsCASecretsItDidNotCreate(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	values := validCAValues(t)
	// Created outside Podmin: no nonce at all.
	if err := ce.secrets.Create(ctx, caName(t, secrets.WorkloadCAKey), values[secrets.WorkloadCAKey]); err != nil {
		t.Fatal(err)
	}
	// Created by another context: a nonce that is not ours.
	if err := ce.secrets.CreateWithNonce(ctx, caName(t, secrets.ClusterCA), values[secrets.ClusterCA], contexts.NewNonce()); err != nil {
		t.Fatal(err)
	}
	sres, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sres.Secrets {
		if s.Action != "kept" {
			t.Fatalf("setup %+v, want both kept", sres.Secrets)
		}
	}
	var shown lifecycle.PlanSummary
	res, err := ce.Destroy(ctx, lifecycle.DestroyOptions{Confirm: func(p lifecycle.PlanSummary) error { shown = p; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	kept := keptSteps(shown)
	if len(kept) != 2 || !strings.Contains(kept[0], "/demo/_system/workload-ca-key: not created by this context") ||
		!strings.Contains(kept[1], "/demo/_system/cluster-ca: not created by this context") || !strings.Contains(kept[0], "delete it yourself") {
		t.Fatalf("plan %q", shown.Steps)
	}
	for i, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		if a := res.Secrets[i]; a.Action != "kept" || !strings.HasPrefix(a.Reason, "not created by this context") {
			t.Errorf("%s: result %+v, want kept", k, a)
		}
		if v, ok := ce.secret(t, k); !ok || !bytes.Equal(v, values[k]) {
			t.Errorf("destroy changed or deleted %s", k)
		}
	}
	// The rest of what this context created is gone.
	if !res.BucketDeleted || !res.ContextRemoved {
		t.Fatalf("destroy %+v", res)
	}
}

// A second context of a same-named cluster (another bucket, same secrets
// store) cannot destroy the first one's CA secrets.
func TestDestroyOfSameNamedClusterKeepsTheOthersCASecrets(t *testing.T) {
	first := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := first.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		before[k], _ = first.secret(t, k)
	}
	second := newClusterEnv(t, false)
	second.secrets = first.secrets
	if _, err := second.Connect(ctx, builtins.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "other-bucket"}); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	res, err := second.Destroy(ctx, lifecycle.DestroyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		if v, ok := first.secret(t, k); !ok || !bytes.Equal(v, before[k]) || res.Secrets[i].Action != "kept" {
			t.Errorf("%s: stored %v, result %+v; want kept unchanged", k, ok, res.Secrets[i])
		}
	}
	// The first context still proves them and destroys them.
	res, err = first.Destroy(ctx, lifecycle.DestroyOptions{})
	if err != nil || res.Secrets[0].Action != "destroyed" || res.Secrets[1].Action != "destroyed" {
		t.Fatalf("first destroy %+v, %v", res.Secrets, err)
	}
}

// unreadableNonces fails every create nonce read.
type unreadableNonces struct{ secrets.NonceStore }

func (unreadableNonces) CreateNonce(context.Context, secrets.Name) (string, error) {
	return "", errors.New("permission denied")
}

func TestDestroyFailsClosedWhenTheCANonceCannotBeRead(t *testing.T) {
	ce := newClusterEnv(t, true)
	ctx := t.Context()
	if _, err := ce.Setup(ctx, lifecycle.SetupOptions{NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	ce.Secrets = func(context.Context, contexts.Context, string) (secrets.Store, error) {
		return unreadableNonces{ce.secrets}, nil
	}
	asked := false
	_, err := ce.Destroy(ctx, lifecycle.DestroyOptions{Confirm: func(lifecycle.PlanSummary) error { asked = true; return nil }})
	if !errors.Is(err, lifecycle.ErrNotOwned) || !strings.Contains(err.Error(), "nothing was deleted") || asked {
		t.Fatalf("destroy = %v (confirmation asked: %v); want ErrNotOwned before the confirmation", err, asked)
	}
	for _, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		if _, ok := ce.secret(t, k); !ok {
			t.Errorf("%s was deleted", k)
		}
	}
	if exists, _ := ce.bucket.BucketExists(ctx); !exists {
		t.Error("the bucket was deleted")
	}
	if _, err := ce.CurrentContext(); err != nil {
		t.Errorf("the context was removed: %v", err)
	}
}

// On Parameter Store the proof is the parameter's podmin:create-nonce tag,
// read with ListTagsForResource: parameters without this context's tag
// survive destroy, and a tag read that fails deletes nothing.
func TestAWSDestroyKeepsCASecretsItDidNotCreate(t *testing.T) {
	ae := newAWSEnv(t)
	ctx := t.Context()
	wk, ca := caName(t, secrets.WorkloadCAKey).String(), caName(t, secrets.ClusterCA).String()
	ae.ssm.Seed(wk, "SecureString", "made-by-hand")
	ae.ssm.SeedTagged(ca, "made-by-another-context", map[string]string{"podmin:cluster": "demo", secrets.CreateNonceTag: contexts.NewNonce()})

	ae.ssm.BreakTags(ca, "AccessDeniedException")
	_, err := ae.Destroy(ctx, lifecycle.DestroyOptions{})
	if !errors.Is(err, lifecycle.ErrNotOwned) || !strings.Contains(err.Error(), "ssm:ListTagsForResource") {
		t.Fatalf("destroy with unreadable tags = %v; want ErrNotOwned naming ssm:ListTagsForResource", err)
	}
	if ae.secret(t, "workload-ca-key") != "made-by-hand" || ae.secret(t, "cluster-ca") != "made-by-another-context" {
		t.Fatal("a refused destroy deleted a CA secret")
	}
	if _, err := ae.CurrentContext(); err != nil {
		t.Fatalf("a refused destroy removed the context: %v", err)
	}
	ae.ssm.BreakTags(ca, "")

	var shown lifecycle.PlanSummary
	res, err := ae.Destroy(ctx, lifecycle.DestroyOptions{Confirm: func(p lifecycle.PlanSummary) error { shown = p; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	kept := keptSteps(shown)
	if len(kept) != 2 || !strings.Contains(kept[0], "aws ssm delete-parameter --name "+wk) {
		t.Fatalf("plan %q", shown.Steps)
	}
	if res.Secrets[0].Action != "kept" || res.Secrets[1].Action != "kept" || !res.ContextRemoved {
		t.Fatalf("destroy %+v", res)
	}
	if ae.secret(t, "workload-ca-key") != "made-by-hand" || ae.secret(t, "cluster-ca") != "made-by-another-context" {
		t.Fatal("destroy deleted a CA secret this context did not create")
	}
}
