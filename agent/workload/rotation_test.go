// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/state"
)

// currentLeaf reads the leaf the Pod's identity symlink selects.
func currentLeaf(t testing.TB, m *Manager, pod string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(m.PodDir(pod), LinkName, CertFile))
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func readState(t testing.TB, s Objects, key ed25519.PrivateKey) pki.CAState {
	t.Helper()
	obj, err := s.Get(context.Background(), state.IdentityCAPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := pki.ParseCAState(obj.Data, key)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// chainsAt reports whether leaf chains, at now, to one of trusted: same
// issuer name, a valid signature and both certificates valid.
func chainsAt(leaf *x509.Certificate, trusted []*x509.Certificate, now time.Time) bool {
	return chainsAtCached(leaf, trusted, now, nil)
}

// sigKey names one (leaf, CA) signature check for a cache.
type sigKey struct{ leaf, ca *x509.Certificate }

func chainsAtCached(leaf *x509.Certificate, trusted []*x509.Certificate, now time.Time, sigs map[sigKey]bool) bool {
	if now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return false
	}
	for _, c := range trusted {
		if !bytes.Equal(c.RawSubject, leaf.RawIssuer) || now.Before(c.NotBefore) || !now.Before(c.NotAfter) {
			continue
		}
		ok, seen := sigs[sigKey{leaf, c}]
		if !seen {
			ok = leaf.CheckSignatureFrom(c) == nil
			if sigs != nil {
				sigs[sigKey{leaf, c}] = ok
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestRotationTwoYearsThreeAgents drives three agents through two years
// of five-minute polls with an injected clock; leadership moves from the
// first to the second agent after a year. At every step every current leaf
// chains to a valid CA in every agent's bundle, no bundle holds more than
// two certificates, and a retired CA disappears 30 days after promotion.
func TestRotationTwoYearsThreeAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("two simulated years")
	}
	t.Run("bucket only", func(t *testing.T) { simulateTwoYears(t, nil) })
	// With --workload-ca-publish every bundle the leader settles on is
	// also at the external destination.
	ext := &External{Store: newFakeStore(), Key: "trust/demo.pem"}
	t.Run("external copy", func(t *testing.T) { simulateTwoYears(t, ext) })
}

func simulateTwoYears(t *testing.T, ext *External) {
	ctx := context.Background()
	store := newFakeStore()
	key := newKey(t)
	clk := &clock{t: t0}
	const step = 5 * time.Minute
	var leaders [3]*leaderFlag
	var agents [3]*Manager
	var pods [3]Pod
	for i := range agents {
		leaders[i] = &leaderFlag{}
		agents[i] = newManager(t, agentOpts{store: store, key: key, clock: clk, leader: leaders[i], external: ext})
		pods[i] = Pod{Name: fmt.Sprintf("web-%d", i), Namespace: "product", Service: "frontend"}
	}
	leaders[0].set(true)
	var (
		leaves     [3]*x509.Certificate
		trusted    [3][]*x509.Certificate
		bundles    [3][]byte
		issued     int
		promotions []time.Time
		drops      []time.Time
		pendings   int
		lastState  pki.CAState
		lastETag   string
		sigs       = map[sigKey]bool{}
	)
	// Cluster creation: the leader creates the CA and every agent reads
	// it before the first Pod starts.
	for i, a := range agents {
		mustRefresh(t, a)
		bundles[i] = a.Bundle()
		trusted[i], _ = pki.ParseCertsPEM(bundles[i])
	}
	end := t0.Add(2 * 365 * 24 * time.Hour)
	for now := t0; now.Before(end); now = now.Add(step) {
		clk.t = now
		if now.Sub(t0) >= 365*24*time.Hour && leaders[0].IsLeader() {
			leaders[0].set(false)
			leaders[1].set(true)
		}
		for i, a := range agents {
			changed, err := a.Refresh(ctx)
			if err != nil {
				t.Fatalf("%s: agent %d refresh: %v", now, i, err)
			}
			if b := a.Bundle(); !bytes.Equal(b, bundles[i]) {
				bundles[i] = b
				if trusted[i], err = pki.ParseCertsPEM(b); err != nil {
					t.Fatal(err)
				}
				if len(trusted[i]) > 2 {
					t.Fatalf("%s: agent %d trusts %d certificates", now, i, len(trusted[i]))
				}
			}
			if changed || a.Due() || leaves[i] == nil {
				id, err := a.Ensure(ctx, pods[i])
				if err != nil {
					t.Fatalf("%s: agent %d ensure: %v", now, i, err)
				}
				if id.Issued {
					issued++
					leaves[i] = currentLeaf(t, a, pods[i].Name)
					if id.Revision != pki.Fingerprint(leaves[i]) {
						t.Fatalf("revision %s is not the leaf's fingerprint", id.Revision)
					}
					for j := range agents {
						pool := x509.NewCertPool()
						for _, c := range trusted[j] {
							pool.AddCert(c)
						}
						if _, err := leaves[i].Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSName: "frontend.product.svc.cluster.local"}); err != nil {
							t.Fatalf("%s: agent %d's new leaf does not verify with agent %d's bundle: %v", now, i, j, err)
						}
					}
				}
			}
		}
		for i, l := range leaves {
			for j := range agents {
				if !chainsAtCached(l, trusted[j], now, sigs) {
					t.Fatalf("%s: agent %d's leaf (until %s) does not chain to a CA agent %d trusts", now, i, l.NotAfter, j)
				}
			}
		}
		obj, err := store.Get(ctx, state.IdentityCAPath, objstore.GetOptions{IfNoneMatch: lastETag})
		if err == nil {
			st := readState(t, store, key)
			switch {
			case st.Pending != nil && lastState.Pending == nil:
				pendings++
			case lastState.Pending != nil && st.Active.Equal(lastState.Pending):
				promotions = append(promotions, now)
				if d := now.Sub(st.RetiredAt); d != 0 {
					t.Fatalf("%s: retiredAt %s", now, st.RetiredAt)
				}
				if d := now.Sub(lastState.PendingSince); d < pki.Propagation {
					t.Fatalf("%s: promoted %s after the delay began", now, d)
				}
				if ext != nil {
					e, err := ext.Store.Get(ctx, ext.Key, objstore.GetOptions{})
					if err != nil || !bytes.Equal(e.Data, st.BundlePEM()) {
						t.Fatalf("%s: promoted while the external copy lacks the new CA (%v)", now, err)
					}
				}
			case lastState.Retired != nil && st.Retired == nil:
				drops = append(drops, now)
			}
			lastState, lastETag = st, obj.ETag
		} else if !errors.Is(err, objstore.ErrNotModified) {
			t.Fatal(err)
		}
		if ext != nil {
			e, err := ext.Store.Get(ctx, ext.Key, objstore.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The external copy may lag a bundle change by one pass, but it
			// always holds the active CA and never more than two.
			certs, err := pki.ParseCertsPEM(e.Data)
			if err != nil || len(certs) > 2 || !slices.ContainsFunc(certs, lastState.Active.Equal) {
				t.Fatalf("%s: external copy holds %d certificates without the active CA (%v)", now, len(certs), err)
			}
		}
	}
	if len(promotions) != 2 || pendings != 2 {
		t.Fatalf("%d pending publications and %d promotions in two years, want 2 each", pendings, len(promotions))
	}
	if len(drops) != 2 {
		t.Fatalf("retired CA dropped %d times, want 2", len(drops))
	}
	for i, p := range promotions {
		if d := drops[i].Sub(p); d < pki.RetainRetired || d > pki.RetainRetired+step {
			t.Errorf("retired CA kept %s, want 30 days", d)
		}
	}
	t.Logf("%d leaves issued; promotions at %v; retired dropped at %v", issued, promotions, drops)
}

// TestSupersededLeaderRefused: a leader that read identity/ca.json before
// another leader wrote it cannot overwrite the newer state.
func TestSupersededLeaderRefused(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore()
	key := newKey(t)
	clk := &clock{t: t0}
	a := newManager(t, agentOpts{store: store, key: key, clock: clk})
	mustRefresh(t, a)
	first := readState(t, store, key)
	clk.t = first.Active.NotAfter.Add(-pki.RotateBefore)
	// b reads the current state, then a rotates before b writes.
	var b *Manager
	store.beforePut = func() {
		store.beforePut = nil
		if err := a.Rotate(ctx); err != nil {
			t.Errorf("a rotate: %v", err)
		}
	}
	b = newManager(t, agentOpts{store: store, key: key, clock: clk})
	err := b.Rotate(ctx)
	if !errors.Is(err, ErrSuperseded) {
		t.Fatalf("superseded leader's write: %v, want ErrSuperseded", err)
	}
	st := readState(t, store, key)
	if st.Pending == nil {
		t.Fatal("a's pending CA is missing")
	}
	// b's next pass sees a's state and has nothing to do.
	if err := b.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if again := readState(t, store, key); !again.Pending.Equal(st.Pending) {
		t.Error("b replaced a's pending CA")
	}
}

// TestMissedWindowRecovery: when no leader ran through the rotation window
// and the active CA expired, the next leader pass promotes a replacement
// at once and agents issue from it.
func TestMissedWindowRecovery(t *testing.T) {
	for _, withExternal := range []bool{false, true} {
		t.Run(fmt.Sprintf("external=%v", withExternal), func(t *testing.T) {
			ctx := context.Background()
			store := newFakeStore()
			key := newKey(t)
			clk := &clock{t: t0}
			var ext *External
			extStore := newFakeStore()
			if withExternal {
				ext = &External{Store: extStore, Key: "trust/podmin-demo.pem"}
			}
			leader := &leaderFlag{on: true}
			a := newManager(t, agentOpts{store: store, key: key, clock: clk, leader: leader, external: ext})
			b := newManager(t, agentOpts{store: store, key: key, clock: clk, leader: &leaderFlag{}})
			mustRefresh(t, a)
			mustRefresh(t, b)
			old := readState(t, store, key).Active
			leader.set(false)
			clk.t = old.NotAfter.Add(time.Hour)
			if _, err := b.Ensure(ctx, Pod{Name: "web", Namespace: "default"}); err == nil || !strings.Contains(err.Error(), "no workload CA certificate is valid") {
				t.Fatalf("issued from an expired CA: %v", err)
			}
			leader.set(true)
			mustRefresh(t, a)
			st := readState(t, store, key)
			if st.Active.Equal(old) || !st.Retired.Equal(old) || st.Pending != nil {
				t.Fatalf("recovery state: active new=%v retired old=%v pending=%v", !st.Active.Equal(old), st.Retired.Equal(old), st.Pending != nil)
			}
			if withExternal {
				obj, err := extStore.Get(ctx, ext.Key, objstore.GetOptions{})
				if err != nil || !bytes.Equal(obj.Data, st.BundlePEM()) {
					t.Fatalf("external bundle not published on recovery: %v", err)
				}
			}
			mustRefresh(t, b)
			if _, err := b.Ensure(ctx, Pod{Name: "web", Namespace: "default"}); err != nil {
				t.Fatal(err)
			}
			leaf := currentLeaf(t, b, "web")
			if !chainsAt(leaf, st.Certs(), clk.Now()) {
				t.Fatal("recovered leaf does not chain")
			}
		})
	}
}

// TestExternalPublication: the pending CA's delay starts only once the
// exact bundle is observed at the destination, promotion rechecks it, and
// a tampered copy is replaced and restarts the delay.
func TestExternalPublication(t *testing.T) {
	ctx := context.Background()
	store, extStore := newFakeStore(), newFakeStore()
	key := newKey(t)
	clk := &clock{t: t0}
	ext := &External{Store: extStore, Key: "trust/podmin-demo.pem"}
	a := newManager(t, agentOpts{store: store, key: key, clock: clk, external: ext})
	mustRefresh(t, a)
	bundleAt := func() []byte {
		obj, err := extStore.Get(ctx, ext.Key, objstore.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.Data
	}
	if !bytes.Equal(bundleAt(), readState(t, store, key).BundlePEM()) {
		t.Fatal("first CA not published externally")
	}
	clk.t = readState(t, store, key).Active.NotAfter.Add(-pki.RotateBefore)
	mustRefresh(t, a) // publishes pending, then the external copy
	st := readState(t, store, key)
	if st.Pending == nil || !st.PendingSince.IsZero() {
		t.Fatalf("pending %v since %v: the delay must wait for external observation", st.Pending != nil, st.PendingSince)
	}
	if !bytes.Equal(bundleAt(), st.BundlePEM()) || len(st.Certs()) != 2 {
		t.Fatal("external copy lacks the pending CA")
	}
	clk.Add(time.Minute)
	mustRefresh(t, a) // observes it: the delay starts now
	started := clk.Now()
	if st = readState(t, store, key); !st.PendingSince.Equal(started) {
		t.Fatalf("delay started at %v, want %v", st.PendingSince, started)
	}
	// Someone overwrites the destination: promotion rechecks and waits.
	if _, err := extStore.Put(ctx, ext.Key, []byte("tampered")); err != nil {
		t.Fatal(err)
	}
	clk.Add(pki.Propagation)
	mustRefresh(t, a)
	if st = readState(t, store, key); st.Retired != nil || !st.PendingSince.IsZero() {
		t.Fatal("promoted although the external bundle was not observed")
	}
	if !bytes.Equal(bundleAt(), st.BundlePEM()) {
		t.Fatal("tampered external bundle not republished")
	}
	clk.Add(time.Minute)
	mustRefresh(t, a)
	restarted := clk.Now()
	clk.Add(pki.Propagation - time.Second)
	mustRefresh(t, a)
	if readState(t, store, key).Retired != nil {
		t.Fatal("promoted before the restarted delay ended")
	}
	clk.Add(time.Second)
	mustRefresh(t, a)
	st = readState(t, store, key)
	if st.Retired == nil || st.Pending != nil || st.RetiredAt.Sub(restarted) != pki.Propagation {
		t.Fatalf("not promoted after the delay: %+v", st)
	}
	if !bytes.Equal(bundleAt(), st.BundlePEM()) {
		t.Fatal("external bundle changed at promotion")
	}
}
