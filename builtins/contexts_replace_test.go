// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
)

// TestConnectRefusesToReplaceABucket connects a saved context to another
// bucket, as a typo would: refused before anything is created unless
// Replace is given; then the result says what was replaced, and the
// context keeps the proof of both buckets it created, so going back to the
// right one keeps it Podmin's and the typo's bucket can still be destroyed
// by proof.
func TestConnectRefusesToReplaceABucket(t *testing.T) {
	ctx := t.Context()
	env := testEnv(t)
	store := localsecrets.New(filepath.Join(env.Dirs.Data, "secrets"))
	env.Secrets = func(context.Context, contexts.Context, string) (secrets.Store, error) { return store, nil }
	dir := t.TempDir()
	right, typo := filepath.Join(dir, "my-lab"), filepath.Join(dir, "my-lba")
	connect := func(bucket, provider string, replace bool) (ConnectResult, error) {
		return env.Connect(ctx, ConnectOptions{Cluster: "my-lab", Provider: provider, Bucket: bucket, Replace: replace})
	}
	first, err := connect(right, "local", false)
	if err != nil || !first.BucketOwned || first.Previous != nil {
		t.Fatalf("first connect: %+v %v", first, err)
	}
	// Reconnecting the same bucket is no replacement.
	if res, err := connect(right, "local", false); err != nil || !res.BucketOwned || res.Previous != nil || !res.Replaced {
		t.Fatalf("reconnect: %+v %v", res, err)
	}

	for _, tc := range []struct{ bucket, provider, want string }{
		{typo, "local", fmt.Sprintf("context my-lab already connects bucket %s (provider local, region local): connecting it to bucket %s (provider local) would replace that: nothing was created or saved; check the bucket's name, pass --replace (replace = True in a recipe) to replace it (the context keeps the proof of every bucket it created), or connect under another cluster name", right, typo)},
		{"my-lab-state", "aws", fmt.Sprintf("context my-lab already connects bucket %s (provider local, region local): connecting it to bucket my-lab-state (provider aws) would replace that", right)},
	} {
		_, err := connect(tc.bucket, tc.provider, false)
		if !errors.Is(err, ErrWouldReplace) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("connect to %s without replace: %v\nwant %s", tc.bucket, err, tc.want)
		}
	}
	if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused connect created %s: %v", typo, err)
	}
	if c, err := env.CurrentContext(); err != nil || c.Bucket != right || c.BucketNonce != first.Context.BucketNonce {
		t.Fatalf("a refused connect changed the context: %+v %v", c, err)
	}

	mistake, err := connect(typo, "local", true)
	if err != nil || !mistake.BucketCreated || !mistake.BucketOwned || mistake.Previous == nil || mistake.Previous.Bucket != right {
		t.Fatalf("connect --replace: %+v %v", mistake, err)
	}
	back, err := connect(right, "local", true)
	if err != nil || back.BucketCreated || !back.BucketOwned || back.Context.BucketNonce != first.Context.BucketNonce || back.Previous.Bucket != typo {
		t.Fatalf("back to the right bucket: %+v %v; want it still Podmin's, with its nonce", back, err)
	}
	want := []contexts.CreatedBucket{
		{Provider: "local", Region: "local", Bucket: right, Nonce: first.Context.BucketNonce},
		{Provider: "local", Region: "local", Bucket: typo, Nonce: mistake.Context.BucketNonce},
	}
	if got := back.Context.CreatedBuckets; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("created buckets %+v, want %+v", got, want)
	}

	// The mistake is destroyed by proof: reconnect to it, destroy it.
	again, err := connect(typo, "local", true)
	if err != nil || !again.BucketOwned {
		t.Fatalf("reconnect to the typo's bucket: %+v %v", again, err)
	}
	res, err := env.Destroy(ctx, DestroyOptions{Confirm: func(PlanSummary) error { return nil }})
	if err != nil || !res.BucketDeleted {
		t.Fatalf("destroy the typo's bucket: %+v %v", res, err)
	}
	if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the typo's bucket remains: %v", err)
	}
	if _, err := os.Stat(right); err != nil {
		t.Fatalf("destroying the typo's bucket touched the right one: %v", err)
	}
}

// TestConnectForgetsAProofTheBucketNoLongerHolds reconnects a context to a
// bucket it created that was since replaced by another of the same name:
// the old nonce proves nothing, so it is dropped, and the bucket is not
// Podmin's.
func TestConnectForgetsAProofTheBucketNoLongerHolds(t *testing.T) {
	ctx := t.Context()
	env := testEnv(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if _, err := env.Connect(ctx, ConnectOptions{Cluster: "demo", Provider: "local", Bucket: a}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Connect(ctx, ConnectOptions{Cluster: "demo", Provider: "local", Bucket: b, Replace: true}); err != nil {
		t.Fatal(err)
	}
	// Someone deletes bucket a and makes another of that name.
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(a, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := env.Connect(ctx, ConnectOptions{Cluster: "demo", Provider: "local", Bucket: a, Replace: true})
	if err != nil || res.BucketOwned || res.Context.BucketNonce != "" {
		t.Fatalf("reconnect to a replaced bucket: %+v %v", res, err)
	}
	if got := res.Context.CreatedBuckets; len(got) != 1 || got[0].Bucket != b {
		t.Fatalf("created buckets %+v, want only %s", got, b)
	}
}
