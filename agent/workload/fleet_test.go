// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/state"
)

// fleetClock is the clock the nodes of a fleet share.
type fleetClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fleetClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fleetClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// leaderFlag is a leadership answer the test sets.
type leaderFlag struct{ on atomic.Bool }

func (l *leaderFlag) IsLeader() bool { return l.on.Load() }

// instance is one run of a Pod on a node: from one change of its static
// Pod file (kubelet restarts it) to the next.
type instance struct {
	started time.Time
	// gen is the identity generation the instance mounted; startCA the
	// ca.crt it could read when it started.
	gen     string
	startCA []byte
	leaf    *x509.Certificate
}

// restart is a change of a running Pod's static Pod file.
type restart struct {
	node, pod string
	at        time.Time
	old, new  *x509.Certificate
}

// fleetNode is one in-process agent: its workload identities and its
// static-Pod reconciler over its own node root.
type fleetNode struct {
	id        string
	root      string
	m         *workload.Manager
	r         *staticpod.Reconciler
	files     map[string][]byte
	instances map[string]*instance
}

// fleet is three agents of NodeGroup workers sharing one local bucket,
// each running the Pods web (with a Service) and api.
type fleet struct {
	t        *testing.T
	bucket   *local.Bucket
	key      ed25519.PrivateKey
	clk      *fleetClock
	window   time.Duration
	nodes    []*fleetNode
	pods     []string
	restarts []restart
	// leader is the first node's leadership.
	leader leaderFlag
	// chains and bundles cache the signature checks and parsed bundles of
	// chainsTo.
	chains  map[[2]string]bool
	bundles map[string][]*x509.Certificate
}

// fleetStep is the longest time between two rounds of the agents.
const fleetStep = 30 * time.Minute

const fleetNodeGroup = "workers"

// newFleet starts the fleet at start with the active workload CA that
// caFor makes from the fleet's key already in the bucket, and runs its
// first round: every node publishes both Pods with a leaf. The first node
// leads when leader is set.
func newFleet(t *testing.T, start time.Time, window time.Duration, leader bool, caFor func(ed25519.PrivateKey) *x509.Certificate) *fleet {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	f := &fleet{t: t, bucket: local.Open(filepath.Join(dir, "bucket")), clk: &fleetClock{t: start}, window: window, pods: []string{"api", "web"},
		chains: map[[2]string]bool{}, bundles: map[string][]*x509.Certificate{}}
	f.leader.on.Store(leader)
	if err := f.bucket.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := pki.GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if f.key, err = pki.ParseWorkloadKey(v); err != nil {
		t.Fatal(err)
	}
	{
		data, err := pki.CAState{Active: caFor(f.key)}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.bucket.Put(ctx, state.IdentityCAPath, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range f.pods {
		f.deploy(name, name == "web")
	}
	for i, id := range []string{"node-a", "node-b", "node-c"} {
		n := &fleetNode{id: id, root: filepath.Join(dir, id), files: map[string][]byte{}, instances: map[string]*instance{}}
		var lead workload.Leader = &leaderFlag{}
		if i == 0 {
			lead = &f.leader
		}
		n.m, err = workload.New(workload.Options{
			Store: f.bucket, Cluster: "demo", Root: n.root, Key: f.key, Leader: lead, Now: f.clk.Now,
			NodeGroup: fleetNodeGroup, Node: id, RestartWindow: window,
		})
		if err != nil {
			t.Fatal(err)
		}
		n.r, err = staticpod.New(staticpod.Options{
			Store: f.bucket, Cluster: "demo", NodeGroup: fleetNodeGroup, Root: n.root, Identity: n.m,
			BucketExists: f.bucket.BucketExists, Log: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		f.nodes = append(f.nodes, n)
	}
	f.step()
	return f
}

func (f *fleet) deploy(name string, service bool) {
	f.t.Helper()
	data, err := manifest.Build(manifest.BuildOptions{Name: name, NodeGroup: fleetNodeGroup, Images: []string{name + ":v1"}, Service: service})
	if err != nil {
		f.t.Fatal(err)
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{Name: name, NodeGroup: fleetNodeGroup})
	if err != nil {
		f.t.Fatal(err)
	}
	k, _ := state.NewKey(fleetNodeGroup, name)
	d := state.Deployment{Key: k, Namespace: ex.Namespace, Pod: ex.PodYAML}
	if ex.Service != nil {
		d.ServiceName, d.Service = ex.Service.Name, ex.ServiceYAML
	}
	if _, err := state.NewCommitter(f.bucket, state.CommitOptions{}).Deploy(context.Background(), d); err != nil {
		f.t.Fatal(err)
	}
}

// step is one round of the agents at the clock's time, the leader first:
// each refreshes the CA state and, when the bundle changed or a leaf is
// due, runs an index-fenced reconcile pass (what Manager.Run pokes).
// Every change of a static Pod file is recorded as a restart.
func (f *fleet) step() {
	f.t.Helper()
	ctx := context.Background()
	now := f.clk.Now()
	for _, n := range f.nodes {
		changed, err := n.m.Refresh(ctx)
		if err != nil {
			f.t.Fatalf("%s: %s refresh: %v", now, n.id, err)
		}
		if !changed && !n.m.Due() && len(n.files) > 0 {
			continue
		}
		n.r.IdentityChanged()
		if _, err := n.r.Reconcile(ctx); err != nil {
			f.t.Fatalf("%s: %s reconcile: %v", now, n.id, err)
		}
		for _, pod := range f.pods {
			data, err := os.ReadFile(filepath.Join(n.root, "etc/podmin/manifests", pod+".yaml"))
			if err != nil {
				f.t.Fatal(err)
			}
			if bytes.Equal(data, n.files[pod]) {
				continue
			}
			n.files[pod] = data
			gen, err := os.Readlink(filepath.Join(n.m.PodDir(pod), workload.LinkName))
			if err != nil {
				f.t.Fatal(err)
			}
			inst := &instance{started: now, gen: filepath.Base(gen), startCA: f.mountedCA(n, pod, filepath.Base(gen)), leaf: f.leaf(n, pod)}
			if prev := n.instances[pod]; prev != nil {
				f.restarts = append(f.restarts, restart{node: n.id, pod: pod, at: now, old: prev.leaf, new: inst.leaf})
			}
			n.instances[pod] = inst
		}
	}
}

// run steps the fleet up to end, a round every fleetStep and whenever a
// node has work due sooner (as Manager.Run wakes), and calls check after
// every round.
func (f *fleet) run(end time.Time, check func(now time.Time)) {
	for now := f.clk.Now(); ; {
		next := now.Add(fleetStep)
		for _, n := range f.nodes {
			if at, ok := n.m.NextDue(); ok && at.After(now) && at.Before(next) {
				next = at
			}
		}
		if next.After(end) {
			return
		}
		now = next
		f.clk.Set(now)
		f.step()
		if check != nil {
			check(now)
		}
	}
}

// mountedCA is the ca.crt of a generation, as the Pod that mounted it
// reads it now.
func (f *fleet) mountedCA(n *fleetNode, pod, gen string) []byte {
	data, err := os.ReadFile(filepath.Join(n.m.PodDir(pod), workload.GenerationsDir, gen, workload.CAFile))
	if err != nil {
		f.t.Fatal(err)
	}
	return data
}

func (f *fleet) leaf(n *fleetNode, pod string) *x509.Certificate {
	data, err := os.ReadFile(filepath.Join(n.m.PodDir(pod), workload.LinkName, workload.CertFile))
	if err != nil {
		f.t.Fatal(err)
	}
	certs, err := pki.ParseCertsPEM(data)
	if err != nil {
		f.t.Fatal(err)
	}
	return certs[0]
}

func (f *fleet) caState() pki.CAState {
	obj, err := f.bucket.Get(context.Background(), state.IdentityCAPath, objstore.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	s, err := pki.ParseCAState(obj.Data, f.key)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// chainsTo reports whether leaf chains, at now, to a certificate of a PEM
// bundle: both valid at now, and the leaf signed by it (signature checks
// cached: the simulation asks the same question every round).
func (f *fleet) chainsTo(leaf *x509.Certificate, bundle []byte, now time.Time) bool {
	if now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return false
	}
	certs, ok := f.bundles[string(bundle)]
	if !ok {
		var err error
		if certs, err = pki.ParseCertsPEM(bundle); err != nil {
			return false
		}
		f.bundles[string(bundle)] = certs
	}
	for _, c := range certs {
		if now.Before(c.NotBefore) || !now.Before(c.NotAfter) {
			continue
		}
		k := [2]string{string(leaf.Raw), string(c.Raw)}
		ok, seen := f.chains[k]
		if !seen {
			ok = leaf.CheckSignatureFrom(c) == nil
			f.chains[k] = ok
		}
		if ok {
			return true
		}
	}
	return false
}

// expiringCA is a workload CA certificate of key that expires at end.
func expiringCA(t *testing.T, key ed25519.PrivateKey, end time.Time) *x509.Certificate {
	t.Helper()
	ca, err := pki.NewCA(rand.Reader, key, pki.WorkloadCASpec("demo"), end.Add(-pki.WorkloadCALifetime))
	if err != nil {
		t.Fatal(err)
	}
	if !ca.NotAfter.Equal(end) {
		t.Fatalf("CA until %s, want %s", ca.NotAfter, end)
	}
	return ca
}

// TestCARotationRestartsNoPod drives a three-node fleet through a whole
// workload CA rotation: the next CA published as pending, its promotion
// ten minutes later, and the retired CA's removal 30 days after that.
// None of the three bundle changes restarts a Pod: every node's ca.crt
// changes in place in the generation each running Pod mounted, within the
// round that saw the change. The only restarts are leaf renewals, each at
// exactly its Pod's point of the restart window after the renewal window
// opened, never two replicas of a DaemonSet at once. At every round every
// leaf chains to the ca.crt every running instance read when it started
// (as a process that reads it only then sees it), also after the old CA
// certificate expired.
func TestCARotationRestartsNoPod(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated month of three agents")
	}
	start := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	const window = 20 * time.Minute
	// The active CA reaches its rotation point two hours after the start.
	f := newFleet(t, start, window, true, func(k ed25519.PrivateKey) *x509.Certificate {
		return expiringCA(t, k, start.Add(pki.RotateBefore+2*time.Hour))
	})
	var (
		pending, promoted, dropped time.Time
		lastState                  = f.caState()
	)
	events := map[time.Time]string{}
	end := start.Add(2*time.Hour + pki.Propagation + pki.RetainRetired + 2*time.Hour)
	f.run(end, func(now time.Time) {
		s := f.caState()
		switch {
		case s.Pending != nil && lastState.Pending == nil:
			pending = now
			events[now] = "pending published"
		case lastState.Pending != nil && s.Pending == nil:
			promoted = now
			events[now] = "promoted"
		case lastState.Retired != nil && s.Retired == nil:
			dropped = now
			events[now] = "retired dropped"
		}
		lastState = s
		bundle := s.BundlePEM()
		for _, n := range f.nodes {
			for _, pod := range f.pods {
				inst := n.instances[pod]
				// Delivered in place, to the running instance.
				if got := f.mountedCA(n, pod, inst.gen); !bytes.Equal(got, bundle) {
					t.Fatalf("%s (%s): %s/%s runs with a ca.crt of %d bytes, not the current bundle", now, events[now], n.id, pod, len(got))
				}
				// Every leaf is trusted by what every instance read
				// when it started.
				for _, o := range f.nodes {
					for _, q := range f.pods {
						if !f.chainsTo(inst.leaf, o.instances[q].startCA, now) {
							t.Fatalf("%s: the leaf of %s/%s does not chain to the ca.crt %s/%s started with at %s",
								now, n.id, pod, o.id, q, o.instances[q].started)
						}
					}
				}
			}
		}
	})
	if pending.IsZero() || promoted.IsZero() || dropped.IsZero() || promoted.Before(pending.Add(pki.Propagation)) || promoted.After(pending.Add(pki.Propagation+fleetStep)) {
		t.Fatalf("rotation: pending %s, promoted %s, dropped %s", pending, promoted, dropped)
	}
	for _, r := range f.restarts {
		// A renewal, at exactly its point of the window (a round may
		// see a CA event too; the restart is still the renewal's).
		want := r.old.NotAfter.Add(-pki.RenewBefore).Add(workload.RestartOffset(fleetNodeGroup, r.node, r.pod, window))
		if !r.at.Equal(want) {
			t.Errorf("%s/%s restarted at %s (round of: %s), want its renewal point %s", r.node, r.pod, r.at, events[r.at], want)
		}
		if !r.new.NotAfter.After(r.old.NotAfter) {
			t.Errorf("%s/%s at %s: the new leaf does not outlive the old one", r.node, r.pod, r.at)
		}
	}
	assertSpread(t, f.restarts, window)
	t.Logf("pending %s, promoted %s, retired dropped %s; %d restarts, all renewals", pending.Format(time.RFC3339), promoted.Format(time.RFC3339),
		dropped.Format(time.RFC3339), len(f.restarts))
}

// assertSpread checks that the replicas of one DaemonSet never restart
// together: restarts of one Pod name that fall in one window are at
// distinct times on distinct nodes.
func assertSpread(t *testing.T, restarts []restart, window time.Duration) {
	t.Helper()
	byPod := map[string][]restart{}
	for _, r := range restarts {
		byPod[r.pod] = append(byPod[r.pod], r)
	}
	for pod, rs := range byPod {
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.node != b.node && a.at.Equal(b.at) {
					t.Errorf("%s restarted on %s and %s at the same moment %s", pod, a.node, b.node, a.at)
				}
			}
		}
	}
}

// spreadAfter checks that every Pod of the fleet restarted exactly once,
// at its point of the window after from, with a new leaf that chains to
// the current bundle, and not all at one moment; it returns the restarts
// as offsets from from.
func (f *fleet) spreadAfter(from time.Time) string {
	t := f.t
	t.Helper()
	if len(f.restarts) != len(f.nodes)*len(f.pods) {
		t.Fatalf("%d restarts, want one per Pod: %+v", len(f.restarts), f.restarts)
	}
	var times []string
	moments := map[time.Time]bool{}
	for _, r := range f.restarts {
		off := workload.RestartOffset(fleetNodeGroup, r.node, r.pod, f.window)
		if !r.at.Equal(from.Add(off)) {
			t.Errorf("%s/%s restarted at %s, want %s (offset %s)", r.node, r.pod, r.at, from.Add(off), off)
		}
		if r.at.After(from.Add(f.window)) {
			t.Errorf("%s/%s restarted at %s, after the window", r.node, r.pod, r.at)
		}
		if r.new.Equal(r.old) || !f.chainsTo(r.new, f.caState().BundlePEM(), r.at) {
			t.Errorf("%s/%s: no valid new leaf", r.node, r.pod)
		}
		moments[r.at] = true
		times = append(times, fmt.Sprintf("%s/%s +%s", r.node, r.pod, r.at.Sub(from).Round(time.Second)))
	}
	if len(moments) < 2 {
		t.Fatal("every restart at one moment")
	}
	assertSpread(t, f.restarts, f.window)
	slices.Sort(times)
	return strings.Join(times, ", ")
}

// inPlace checks that every running Pod's mounted ca.crt is bundle.
func (f *fleet) inPlace(now time.Time, bundle []byte) {
	f.t.Helper()
	for _, n := range f.nodes {
		for _, pod := range f.pods {
			if got := f.mountedCA(n, pod, n.instances[pod].gen); !bytes.Equal(got, bundle) {
				f.t.Fatalf("%s: %s/%s runs with a ca.crt that is not the current bundle", now, n.id, pod)
			}
		}
	}
}

// TestLateRotationSpreadsRestarts: the leader rotates the workload CA an
// hour before it expires (it was away for the rotation point). The leaves
// issued meanwhile end with the old CA and no leaf of it can replace
// them; they are kept, not reissued in a loop. The pending CA reaches
// every Pod in place; at the promotion each leaf is replaced at exactly
// its point of the window after it: spread, none at the same moment.
func TestLateRotationSpreadsRestarts(t *testing.T) {
	start := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	const window = 15 * time.Minute
	f := newFleet(t, start, window, true, func(k ed25519.PrivateKey) *x509.Certificate {
		return expiringCA(t, k, start.Add(time.Hour))
	})
	if s := f.caState(); s.Pending == nil {
		t.Fatal("the leader did not publish the next CA")
	}
	f.inPlace(start, f.caState().BundlePEM())
	var promoted time.Time
	f.run(start.Add(pki.Propagation+fleetStep+window), func(now time.Time) {
		if s := f.caState(); promoted.IsZero() && s.Pending == nil {
			promoted = now
			f.inPlace(now, s.BundlePEM())
		}
		if !promoted.IsZero() && len(f.restarts) > 0 && f.restarts[0].at.Before(promoted) {
			t.Fatalf("%s/%s restarted at %s, before the promotion", f.restarts[0].node, f.restarts[0].pod, f.restarts[0].at)
		}
	})
	t.Logf("pending at %s, promoted at %s; restarts: %s", start.Format(time.RFC3339), promoted.Format(time.RFC3339), f.spreadAfter(promoted))
}

// TestExpiredCARecoverySpreadsRestarts: the active CA expires unrotated:
// no leader ran for its rotation. Until then the leaves it capped at its
// expiry are kept. At expiry a leader recovers with a new CA; the bundle
// changes in place on every node, and each expired leaf is replaced,
// restarting its Pod, at exactly its point of the configured window after
// the node saw it expired: spread over the window, none at the same
// moment.
func TestExpiredCARecoverySpreadsRestarts(t *testing.T) {
	start := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	const window = 15 * time.Minute
	expiry := start.Add(time.Hour)
	f := newFleet(t, start, window, false, func(k ed25519.PrivateKey) *x509.Certificate { return expiringCA(t, k, expiry) })
	f.run(expiry.Add(-time.Second), nil)
	if len(f.restarts) != 0 {
		t.Fatalf("leaves ending with their CA were replaced: %+v", f.restarts)
	}
	f.leader.on.Store(true)
	var seen time.Time
	f.run(expiry.Add(2*window), func(now time.Time) {
		if seen.IsZero() {
			seen = now
			s := f.caState()
			if s.Retired == nil || !s.Retired.NotAfter.Equal(expiry) {
				t.Fatalf("%s: not recovered: %+v", now, s)
			}
			f.inPlace(now, s.BundlePEM())
		}
	})
	if !seen.Equal(expiry) {
		t.Fatalf("recovery seen at %s, want %s", seen, expiry)
	}
	t.Logf("expired and recovered at %s; restarts: %s", expiry.Format(time.RFC3339), f.spreadAfter(seen))
}
