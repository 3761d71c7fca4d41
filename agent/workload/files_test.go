// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/state"
)

func generations(t *testing.T, m *Manager, pod string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(m.PodDir(pod), GenerationsDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestFilesGenerationsAndRevision(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t0}
	root := t.TempDir()
	m := newManager(t, agentOpts{store: newBucket(t), key: newKey(t), clock: clk, root: root})
	mustRefresh(t, m)
	pod := Pod{Name: "web", Namespace: "product", Service: "frontend"}
	id1, err := m.Ensure(ctx, pod)
	if err != nil || !id1.Issued {
		t.Fatalf("first ensure: %+v %v", id1, err)
	}
	dir := filepath.Join(root, "run/podmin/workloads/web")
	if m.PodDir("web") != dir {
		t.Fatalf("pod dir %s, want %s", m.PodDir("web"), dir)
	}
	target, err := os.Readlink(filepath.Join(dir, "identity"))
	if err != nil || target != "identity-generations/"+id1.Revision[:32] {
		t.Fatalf("identity -> %q (%v): want a relative link to the generation", target, err)
	}
	for _, f := range []string{CertFile, KeyFile, CAFile} {
		fi, err := os.Stat(filepath.Join(dir, "identity", f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o444 {
			t.Errorf("%s mode %o, want 0444", f, fi.Mode().Perm())
		}
	}
	if got := pki.Fingerprint(currentLeaf(t, m, "web")); got != id1.Revision {
		t.Fatalf("revision %s, leaf fingerprint %s", id1.Revision, got)
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "identity", CAFile))
	if !bytes.Equal(ca, m.Bundle()) {
		t.Error("ca.crt is not the CA bundle")
	}
	// Same leaf, same revision, no new generation, until renewal is due:
	// at the Pod's point of the restart window after the renewal window
	// opens.
	off := RestartOffset("", "", "web", DefaultRestartWindow)
	clk.Add(pki.LeafLifetime - pki.RenewBefore + off - time.Minute)
	if id, err := m.Ensure(ctx, pod); err != nil || id.Issued || id.Revision != id1.Revision {
		t.Fatalf("ensure before renewal: %+v %v", id, err)
	}
	if m.Due() {
		t.Fatal("due before the renewal window")
	}
	clk.Add(time.Minute)
	if !m.Due() {
		t.Fatal("not due at its point of the window within six hours of expiry")
	}
	id2, err := m.Ensure(ctx, pod)
	if err != nil || !id2.Issued || id2.Revision == id1.Revision {
		t.Fatalf("renewal: %+v %v", id2, err)
	}
	if g := generations(t, m, "web"); len(g) != 2 {
		t.Fatalf("generations after one renewal: %v", g)
	}
	// A leaf found expired (its renewal missed: the agent was down) is
	// replaced at its point of the window after it was found so.
	clk.Add(pki.LeafLifetime)
	if id, err := m.Ensure(ctx, pod); err != nil || id.Issued || id.Revision != id2.Revision {
		t.Fatalf("expired leaf replaced before its point of the window: %+v %v", id, err)
	}
	clk.Add(off)
	id3, err := m.Ensure(ctx, pod)
	if err != nil || !id3.Issued || id3.Revision == id2.Revision {
		t.Fatalf("expired leaf not replaced at its point of the window: %+v %v", id3, err)
	}
	g := generations(t, m, "web")
	if len(g) != 2 || !strings.Contains(strings.Join(g, ","), id2.Revision[:32]) || !strings.Contains(strings.Join(g, ","), id3.Revision[:32]) {
		t.Fatalf("generations %v: want exactly the current and the previous", g)
	}
	// A name change (a Service added) replaces the leaf.
	pod.Service = "api"
	id4, err := m.Ensure(ctx, pod)
	if err != nil || id4.Revision == id3.Revision {
		t.Fatalf("service change kept the leaf: %v", err)
	}
	if l := currentLeaf(t, m, "web"); l.DNSNames[0] != "api.product.svc.cluster.local" {
		t.Fatalf("names %v", l.DNSNames)
	}
	// Forget removes the identity of Pods that left.
	if err := m.Forget(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "identity")); !os.IsNotExist(err) {
		t.Fatalf("identity link kept: %v", err)
	}
}

// TestAdoptAfterRestart: a restarted agent keeps the leaves on the node
// instead of restarting every Pod, and replaces a damaged one.
func TestAdoptAfterRestart(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t0}
	root, store, key := t.TempDir(), newBucket(t), newKey(t)
	m := newManager(t, agentOpts{store: store, key: key, clock: clk, root: root})
	mustRefresh(t, m)
	pods := []Pod{{Name: "a", Namespace: "default"}, {Name: "b", Namespace: "default", Service: "b"}}
	before, err := m.EnsureAll(ctx, pods)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(m.PodDir("b"), LinkName, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(t, agentOpts{store: store, key: key, clock: clk, root: root})
	mustRefresh(t, m2)
	after, err := m2.EnsureAll(ctx, pods)
	if err != nil {
		t.Fatal(err)
	}
	if after["a"].Issued || after["a"].Revision != before["a"].Revision {
		t.Errorf("intact leaf of a was replaced")
	}
	if !after["b"].Issued || after["b"].Revision == before["b"].Revision {
		t.Errorf("damaged generation of b was adopted")
	}
}

// TestAtomicSwitchReaderLoop: a reader that resolves the identity link and
// reads the three files never sees a certificate, key and bundle from
// different generations while renewals switch the link.
func TestAtomicSwitchReaderLoop(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t0}
	m := newManager(t, agentOpts{store: newBucket(t), key: newKey(t), clock: clk})
	mustRefresh(t, m)
	pod := Pod{Name: "web", Namespace: "default"}
	if _, err := m.Ensure(ctx, pod); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(m.PodDir("web"), LinkName)
	var stop atomic.Bool
	var reads, misses atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				target, err := os.Readlink(link)
				if err != nil {
					errs <- err
					return
				}
				dir := filepath.Join(filepath.Dir(link), target)
				crt, err1 := os.ReadFile(filepath.Join(dir, CertFile))
				key, err2 := os.ReadFile(filepath.Join(dir, KeyFile))
				ca, err3 := os.ReadFile(filepath.Join(dir, CAFile))
				if err := errors.Join(err1, err2, err3); err != nil {
					// The generation was pruned after two later switches:
					// a missing file, never a mixed set.
					misses.Add(1)
					continue
				}
				certs, err := pki.ParseCertsPEM(crt)
				if err != nil {
					errs <- err
					return
				}
				k, err := pki.ParseKeyPEM(key)
				if err != nil {
					errs <- err
					return
				}
				if !pki.KeyMatches(certs[0].PublicKey, k) || len(ca) == 0 {
					errs <- errors.New("tls.crt and tls.key are from different generations")
					return
				}
				reads.Add(1)
			}
		})
	}
	for i := 0; i < 100; i++ {
		clk.Add(pki.LeafLifetime)
		if _, err := m.Ensure(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("reader never completed a read")
	}
	t.Logf("%d coherent reads, %d reads of a pruned generation, 100 switches", reads.Load(), misses.Load())
}

// TestBadCAStateRejected: a foreign, truncated or garbage identity/ca.json
// is refused with a log line; the last good state stays and issues.
func TestBadCAStateRejected(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t0}
	store, key := newBucket(t), newKey(t)
	logs := &logBuffer{}
	leader := newManager(t, agentOpts{store: store, key: key, clock: clk})
	mustRefresh(t, leader)
	m := newManager(t, agentOpts{store: store, key: key, clock: clk, leader: &leaderFlag{}, log: logs})
	mustRefresh(t, m)
	good := m.Bundle()
	obj, err := store.Get(ctx, state.IdentityCAPath, getOpts(""))
	if err != nil {
		t.Fatal(err)
	}
	foreignCA, _ := pki.NewCA(rnd{}, newKey(t), pki.WorkloadCASpec("demo"), t0)
	foreign, _ := pki.CAState{Active: foreignCA}.Marshal()
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"foreign":   {foreign, "not made from the stored CA key"},
		"truncated": {obj.Data[:len(obj.Data)/3], "not a workload CA document"},
		"garbage":   {[]byte("<html>503</html>"), "not a workload CA document"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := store.Put(ctx, state.IdentityCAPath, tc.data); err != nil {
				t.Fatal(err)
			}
			changed, err := m.Refresh(ctx)
			if changed || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refresh: changed=%v err=%v, want %q", changed, err, tc.want)
			}
			if !strings.Contains(logs.String(), "refusing workload CA state") || !strings.Contains(logs.String(), tc.want) {
				t.Fatalf("no clear log line:\n%s", logs)
			}
			if !bytes.Equal(m.Bundle(), good) {
				t.Fatal("last good bundle replaced")
			}
			// The leader refuses to rotate over it as well.
			if err := leader.Rotate(ctx); err == nil {
				t.Fatal("leader rotated over an invalid state")
			}
			id, err := m.Ensure(ctx, Pod{Name: "p-" + name, Namespace: "default"})
			if err != nil {
				t.Fatal(err)
			}
			ca, _ := os.ReadFile(filepath.Join(m.PodDir("p-"+name), LinkName, CAFile))
			if !bytes.Equal(ca, good) || id.Revision == "" {
				t.Fatal("issued from something other than the last good state")
			}
		})
	}
	// Nothing is issued before any good state was read.
	fresh := newManager(t, agentOpts{store: store, key: key, clock: clk, leader: &leaderFlag{}})
	_, _ = fresh.Refresh(ctx)
	if _, err := fresh.Ensure(ctx, Pod{Name: "x", Namespace: "default"}); !errors.Is(err, ErrNoCA) {
		t.Fatalf("issued without a good CA state: %v", err)
	}
}

// TestConcurrentEnsureRefreshForget exercises the Manager from many
// goroutines (run with -race).
func TestConcurrentEnsureRefreshForget(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t0}
	m := newManager(t, agentOpts{store: newBucket(t), key: newKey(t), clock: clk})
	mustRefresh(t, m)
	var pods []Pod
	for i := range 40 {
		pods = append(pods, Pod{Name: "p" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Namespace: "default"})
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				if _, err := m.EnsureAll(ctx, pods); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := m.Refresh(ctx); err != nil {
				t.Error(err)
			}
			clk.Add(pki.LeafLifetime / 10)
			_ = m.Due()
		}
	})
	wg.Go(func() {
		for range 5 {
			if err := m.Forget([]string{pods[0].Name}); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	ids, err := m.EnsureAll(ctx, pods)
	if err != nil || len(ids) != len(pods) {
		t.Fatalf("%d identities, %v", len(ids), err)
	}
	for _, p := range pods {
		if got := pki.Fingerprint(currentLeaf(t, m, p.Name)); got != ids[p.Name].Revision {
			t.Errorf("%s: revision %s, on disk %s", p.Name, ids[p.Name].Revision, got)
		}
	}
}

func TestReadKeyRejectsWrongSize(t *testing.T) {
	for name, v := range map[string]string{"short": "AAAA", "garbage": "%%%"} {
		_, err := ReadKey(context.Background(), staticReader(v), "demo")
		if err == nil || !strings.Contains(err.Error(), "32-byte") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
