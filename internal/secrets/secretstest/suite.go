// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secretstest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/internal/secrets"
)

// Cluster is the cluster ID the suite's names use.
const Cluster = "demo"

// Target is one store under test.
type Target struct {
	Store secrets.Store
	// Calls reports how many calls reached the backing service so far (for
	// the local store: how many files and directories exist below its
	// root). The suite asserts that rejected input leaves it unchanged.
	Calls func() int
}

// Run runs the conformance suite. newTarget must return a fresh, empty
// store for each sub-test.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	tests := []struct {
		name string
		fn   func(t *testing.T, tg Target)
	}{
		{"CreateReadUpdate", testCreateReadUpdate},
		{"List", testList},
		{"Limits", testLimits},
		{"DeleteRestore", testDeleteRestore},
		{"Destroy", testDestroy},
		{"BadInput", testBadInput},
		{"SystemKeys", testSystemKeys},
		{"RaceCreate", testRaceCreate},
		{"CreateNonce", testCreateNonce},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newTarget(t)) })
	}
}

func pod(t *testing.T, ns, p, key string) secrets.Name {
	t.Helper()
	n, err := secrets.PodSecret(Cluster, ns, p, key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// noLeak fails when err's text contains a secret value.
func noLeak(t *testing.T, err error, values ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, v := range values {
		if v != "" && strings.Contains(err.Error(), v) {
			t.Errorf("error %q contains a secret value", err)
		}
	}
}

func wantErr(t *testing.T, err, target error, contains string, values ...string) {
	t.Helper()
	if !errors.Is(err, target) || !strings.Contains(fmt.Sprint(err), contains) {
		t.Errorf("error = %v, want %v containing %q", err, target, contains)
	}
	noLeak(t, err, values...)
}

func mustRead(t *testing.T, tg Target, n secrets.Name, want []byte) {
	t.Helper()
	got, err := tg.Store.Read(t.Context(), n)
	if err != nil {
		t.Fatalf("Read(%s): %v", n, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Read(%s) returned %d bytes that differ from the %d written", n, len(got), len(want))
	}
}

func testCreateReadUpdate(t *testing.T, tg Target) {
	ctx, s := t.Context(), tg.Store
	n := pod(t, "default", "web", "db-password")
	const v1, v2 = "first-s3cret-value", "second-s3cret-value"
	if _, err := s.Read(ctx, n); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("Read(missing) = %v, want ErrNotFound", err)
	}
	wantErr(t, s.Update(ctx, n, secrets.Value(v1)), secrets.ErrNotFound, "use create", v1)
	if err := s.Create(ctx, n, secrets.Value(v1)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	mustRead(t, tg, n, []byte(v1))
	wantErr(t, s.Create(ctx, n, secrets.Value(v2)), secrets.ErrExists, "use update", v1, v2)
	mustRead(t, tg, n, []byte(v1))
	if err := s.Update(ctx, n, secrets.Value(v2)); err != nil {
		t.Fatalf("Update: %v", err)
	}
	mustRead(t, tg, n, []byte(v2))
	// The same key of another Pod or namespace is another secret.
	if _, err := s.Read(ctx, pod(t, "other", "web", "db-password")); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("Read(other namespace) = %v, want ErrNotFound", err)
	}
}

func testList(t *testing.T, tg Target) {
	ctx, s := t.Context(), tg.Store
	names := []secrets.Name{
		pod(t, "default", "web", "a"), pod(t, "default", "web", "b"), pod(t, "default", "web", ".env"),
		pod(t, "default", "api", "a"), pod(t, "product", "web", "a"), pod(t, "product", "db", "x_y-z.1"),
		pod(t, "default", "webx", "a"),
	}
	sys, _ := secrets.SystemSecret(Cluster, secrets.OtelLogsHeaders)
	internal, _ := secrets.InternalSecret(Cluster, secrets.WorkloadCAKey)
	foreign, _ := secrets.PodSecret("other", "default", "web", "a")
	for _, n := range append(names, sys, internal, foreign) {
		if err := s.Create(ctx, n, secrets.Value("listed-value-"+n.Key())); err != nil {
			t.Fatalf("Create(%s): %v", n, err)
		}
	}
	list := func(f secrets.Filter) []string {
		t.Helper()
		entries, err := s.List(ctx, Cluster, f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		var out []string
		for _, e := range entries {
			if e.Provider != s.Provider() || e.LastModified.IsZero() || e.Key == "" {
				t.Errorf("entry %+v: want provider %s, a key and a modification time", e, s.Provider())
			}
			if strings.Contains(fmt.Sprintf("%+v", e), "listed-value") {
				t.Errorf("entry %+v holds a value", e)
			}
			out = append(out, e.Name)
		}
		return out
	}
	check := func(f secrets.Filter, want ...string) {
		t.Helper()
		if got := list(f); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("List(%+v) = %q, want %q", f, got, want)
		}
	}
	check(secrets.Filter{}, "/demo/_system/otel-logs-headers", "/demo/default/api/a", "/demo/default/web/.env",
		"/demo/default/web/a", "/demo/default/web/b", "/demo/default/webx/a", "/demo/product/db/x_y-z.1", "/demo/product/web/a")
	check(secrets.Filter{Namespace: "default", Pod: "web"}, "/demo/default/web/.env", "/demo/default/web/a", "/demo/default/web/b")
	check(secrets.Filter{Namespace: "product"}, "/demo/product/db/x_y-z.1", "/demo/product/web/a")
	check(secrets.Filter{System: true}, "/demo/_system/otel-logs-headers")
	check(secrets.Filter{Namespace: "empty", Pod: "none"})
}

func testLimits(t *testing.T, tg Target) {
	ctx, s := t.Context(), tg.Store
	c := s.Capabilities()
	atLimit := bytes.Repeat([]byte("x"), c.MaxBytes)
	n := pod(t, "default", "web", "big")
	if err := s.Create(ctx, n, atLimit); err != nil {
		t.Fatalf("Create(%d bytes): %v", c.MaxBytes, err)
	}
	mustRead(t, tg, n, atLimit)
	before := tg.Calls()
	over := append(bytes.Clone(atLimit), 'y')
	wantErr(t, s.Create(ctx, pod(t, "default", "web", "over"), over), secrets.ErrInvalid,
		fmt.Sprintf("the value is %d bytes, more than the %d bytes %s accepts", c.MaxBytes+1, c.MaxBytes, s.Provider()))
	wantErr(t, s.Update(ctx, n, over), secrets.ErrInvalid, "more than the")
	wantErr(t, s.Create(ctx, pod(t, "default", "web", "empty"), nil), secrets.ErrInvalid, "the value is empty")
	binary := []byte{0, 0xff, 0xfe, 'b', 'i', 'n', 0x80, '\n'}
	bn := pod(t, "default", "web", "binary")
	if !c.Binary {
		wantErr(t, s.Create(ctx, bn, binary), secrets.ErrInvalid, "is not valid UTF-8, which "+s.Provider()+" requires")
		wantErr(t, s.Update(ctx, n, binary), secrets.ErrInvalid, "is not valid UTF-8")
	}
	if got := tg.Calls(); got != before {
		t.Errorf("rejected values made %d calls, want none", got-before)
	}
	if c.Binary {
		if err := s.Create(ctx, bn, binary); err != nil {
			t.Fatalf("Create(binary): %v", err)
		}
		mustRead(t, tg, bn, binary)
		if err := s.Update(ctx, n, binary); err != nil {
			t.Fatalf("Update(to binary): %v", err)
		}
		mustRead(t, tg, n, binary)
		if err := s.Update(ctx, n, []byte("text again")); err != nil {
			t.Fatalf("Update(to text): %v", err)
		}
		mustRead(t, tg, n, []byte("text again"))
	}
	utf := []byte("ünïcödé ✓ " + strings.Repeat("é", 10))
	un := pod(t, "default", "web", "utf8")
	if err := s.Create(ctx, un, utf); err != nil {
		t.Fatalf("Create(UTF-8): %v", err)
	}
	mustRead(t, tg, un, utf)
}

func testDeleteRestore(t *testing.T, tg Target) {
	ctx, s := t.Context(), tg.Store
	const v = "recoverable-s3cret"
	n := pod(t, "default", "web", "token")
	if err := s.Create(ctx, n, secrets.Value(v)); err != nil {
		t.Fatal(err)
	}
	if s.Capabilities().RecoveryWindowDays == 0 {
		before := tg.Calls()
		msg := s.Provider() + " has no delete/restore: use destroy to delete permanently"
		wantErr(t, s.Delete(ctx, n), secrets.ErrUnsupported, msg, v)
		wantErr(t, s.Restore(ctx, n), secrets.ErrUnsupported, msg, v)
		if got := tg.Calls(); got != before {
			t.Errorf("unsupported operations made %d calls, want none", got-before)
		}
		mustRead(t, tg, n, []byte(v))
		return
	}
	if err := s.Delete(ctx, n); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Read(ctx, n)
	wantErr(t, err, secrets.ErrScheduledForDeletion, "use restore", v)
	wantErr(t, s.Update(ctx, n, secrets.Value("x")), secrets.ErrScheduledForDeletion, "use restore", v)
	wantErr(t, s.Create(ctx, n, secrets.Value("x")), secrets.ErrScheduledForDeletion, "use restore", v)
	wantErr(t, s.Delete(ctx, n), secrets.ErrScheduledForDeletion, "already scheduled", v)
	entries, err := s.List(ctx, Cluster, secrets.Filter{Namespace: "default", Pod: "web"})
	if err != nil || len(entries) != 1 || entries[0].DeletionScheduled.IsZero() {
		t.Errorf("List = %+v, %v: want the secret marked as scheduled for deletion", entries, err)
	}
	if err := s.Restore(ctx, n); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	mustRead(t, tg, n, []byte(v))
	if err := s.Restore(ctx, n); err != nil {
		t.Errorf("Restore(live) = %v, want no change", err)
	}
	missing := pod(t, "default", "web", "missing")
	wantErr(t, s.Delete(ctx, missing), secrets.ErrNotFound, missing.String())
	wantErr(t, s.Restore(ctx, missing), secrets.ErrNotFound, missing.String())
	// A secret scheduled for deletion can still be destroyed at once.
	if err := s.Delete(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := s.Destroy(ctx, n); err != nil {
		t.Fatalf("Destroy(scheduled): %v", err)
	}
	if err := s.Create(ctx, n, secrets.Value(v)); err != nil {
		t.Fatalf("Create after Destroy: %v", err)
	}
}

func testDestroy(t *testing.T, tg Target) {
	ctx, s := t.Context(), tg.Store
	const v = "destroyed-s3cret"
	n := pod(t, "default", "web", "token")
	keep := pod(t, "default", "web", "keep")
	for _, x := range []secrets.Name{n, keep} {
		if err := s.Create(ctx, x, secrets.Value(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Destroy(ctx, n); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if _, err := s.Read(ctx, n); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("Read(destroyed) = %v, want ErrNotFound", err)
	}
	wantErr(t, s.Destroy(ctx, n), secrets.ErrNotFound, n.String(), v)
	mustRead(t, tg, keep, []byte(v))
	if err := s.Create(ctx, n, secrets.Value("again")); err != nil {
		t.Fatalf("Create after Destroy: %v", err)
	}
	mustRead(t, tg, n, []byte("again"))
}

func testBadInput(t *testing.T, tg Target) {
	ctx, s := t.Context(), tg.Store
	before := tg.Calls()
	for _, tc := range []struct{ ns, pod, key, want string }{
		{"default", "web", "a/b", `"a/b" is not a safe key`},
		{"default", "web", "..", `".." is not a safe key`},
		{"default", "web", ".", `"." is not a safe key`},
		{"default", "web", "", "no key given"},
		{"default", "web", "a\x00b", `"a\x00b" is not a safe key`},
		{"default", "web", "a,b", `"a,b" is not a safe key`},
		{"default", "web", strings.Repeat("k", 256), "is not a safe key"},
		{"_system", "web", "a", `"_system" is not a namespace`},
		{"Default", "web", "a", `"Default" is not a valid namespace`},
		{"default", "", "a", "no Pod name given"},
		{"default", "we/b", "a", `"we/b" is not a valid Pod name`},
	} {
		_, err := secrets.PodSecret(Cluster, tc.ns, tc.pod, tc.key)
		wantErr(t, err, secrets.ErrInvalid, tc.want)
	}
	if _, err := secrets.PodSecret("_system", "default", "web", "a"); !errors.Is(err, secrets.ErrInvalid) {
		t.Errorf("PodSecret(cluster _system) = %v, want ErrInvalid", err)
	}
	var zero secrets.Name
	for op, err := range map[string]error{
		"Create":  s.Create(ctx, zero, secrets.Value("v")),
		"Update":  s.Update(ctx, zero, secrets.Value("v")),
		"Delete":  s.Delete(ctx, zero),
		"Restore": s.Restore(ctx, zero),
		"Destroy": s.Destroy(ctx, zero),
	} {
		if !errors.Is(err, secrets.ErrInvalid) {
			t.Errorf("%s(zero name) = %v, want ErrInvalid", op, err)
		}
	}
	if _, err := s.Read(ctx, zero); !errors.Is(err, secrets.ErrInvalid) {
		t.Errorf("Read(zero name) = %v, want ErrInvalid", err)
	}
	for _, f := range []secrets.Filter{{Pod: "web"}, {Namespace: "_system"}, {System: true, Namespace: "default"}, {Namespace: "a/b"}} {
		if _, err := s.List(ctx, Cluster, f); !errors.Is(err, secrets.ErrInvalid) {
			t.Errorf("List(%+v) = %v, want ErrInvalid", f, err)
		}
	}
	if _, err := s.List(ctx, "Bad", secrets.Filter{}); !errors.Is(err, secrets.ErrInvalid) {
		t.Errorf("List(cluster Bad) = %v, want ErrInvalid", err)
	}
	if got := tg.Calls(); got != before {
		t.Errorf("bad input made %d calls, want none", got-before)
	}
}

func testSystemKeys(t *testing.T, tg Target) {
	ctx, s := t.Context(), tg.Store
	for _, key := range append(secrets.InternalSystemKeys(), "anything", "") {
		_, err := secrets.SystemSecret(Cluster, key)
		wantErr(t, err, secrets.ErrInvalid, "--system addresses only")
	}
	sys, err := secrets.SystemSecret(Cluster, secrets.OtelLogsHeaders)
	if err != nil {
		t.Fatal(err)
	}
	headers := []byte(`{"Authorization":"Bearer hdr-s3cret"}`)
	if err := s.Create(ctx, sys, headers); err != nil {
		t.Fatalf("Create(%s): %v", sys, err)
	}
	mustRead(t, tg, sys, headers)
	if sys.String() != "/demo/_system/otel-logs-headers" || !sys.System() || sys.Internal() {
		t.Errorf("system name %s: System=%v Internal=%v", sys, sys.System(), sys.Internal())
	}
	for _, key := range secrets.InternalSystemKeys() {
		n, err := secrets.InternalSecret(Cluster, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, n, secrets.Value("internal-s3cret")); err != nil {
			t.Fatalf("Create(%s): %v", n, err)
		}
	}
	for _, f := range []secrets.Filter{{}, {System: true}} {
		entries, err := s.List(ctx, Cluster, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name != sys.String() || !entries[0].System {
			t.Errorf("List(%+v) = %+v, want only %s", f, entries, sys)
		}
	}
}

func testRaceCreate(t *testing.T, tg Target) {
	ctx, s := t.Context(), tg.Store
	n := pod(t, "default", "web", "raced")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Create(ctx, n, secrets.Value(fmt.Sprintf("value-%d", i))) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, secrets.ErrExists):
			t.Errorf("racing Create: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d racing creates succeeded, want exactly 1", won)
	}
}
