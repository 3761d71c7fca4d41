// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// fakeNodes stands in for a test's node agents and their leader: on every
// tick of the test's virtual clock (a wait's pause) it publishes, for
// each NodeGroup a test declared with t.fake_nodes, the lease and the
// NodeGroup's status object as a leader would, in the real formats, with
// every node reporting the committed revision of every deployment in the
// declared state. Waits in a test therefore end at once in virtual time,
// and a timeout of minutes costs nothing.
type fakeNodes struct {
	store objstore.Store

	mu     sync.Mutex
	now    time.Time
	groups map[string]fakeGroup
	// published is, per NodeGroup, what its status object was last
	// written from; leased is when the lease was last renewed. A tick
	// that would write the same again writes nothing: a wait polls every
	// virtual second, and the test should cost no real time for it.
	published map[string]publishedStatus
	leased    time.Time
	// ix and etag are the index as last read, so unchanged it is not
	// read again.
	ix   *state.Index
	etag string
}

// publishedStatus is what one status object was written from.
type publishedStatus struct {
	group     fakeGroup
	indexETag string
}

// leaseRenewal is how often the fake leader renews its lease in virtual
// time: well within the 60 s a reader takes a lease to be live.
const leaseRenewal = 10 * time.Second

type fakeGroup struct {
	nodes int
	state string
}

// Fake node states of t.fake_nodes.
var fakeStates = []string{"ready", "not-ready", "error", "stopped"}

func newFakeNodes(store objstore.Store, start time.Time) *fakeNodes {
	return &fakeNodes{store: store, now: start, groups: map[string]fakeGroup{}, published: map[string]publishedStatus{}}
}

// Now is the test's virtual clock.
func (f *fakeNodes) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Sleep advances the virtual clock by d and lets the fake nodes report.
func (f *fakeNodes) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
	return f.publish(ctx)
}

// publish writes the lease and the status object of every declared
// NodeGroup, as far as they changed: the lease when it is due for
// renewal, a status object when the index or the NodeGroup's fake state
// changed since it was written.
func (f *fakeNodes) publish(ctx context.Context) error {
	f.mu.Lock()
	groups, now, leased := make(map[string]fakeGroup, len(f.groups)), f.now, f.leased
	for k, v := range f.groups {
		groups[k] = v
	}
	f.mu.Unlock()
	if len(groups) == 0 {
		return nil
	}
	ix, etag, err := f.index(ctx)
	if err != nil {
		return err
	}
	if now.Sub(leased) >= leaseRenewal {
		if err := f.writeLease(ctx); err != nil {
			return err
		}
	}
	for ng, g := range groups {
		f.mu.Lock()
		prev, ok := f.published[ng]
		f.mu.Unlock()
		if ok && prev == (publishedStatus{group: g, indexETag: etag}) {
			continue
		}
		size := g.nodes
		s := &state.NodeGroupStatus{NodeGroup: ng, Leader: "fake-leader", Term: 1, UpdatedAt: now.UTC(), Settled: true, Expected: &size}
		live := g.nodes
		if g.state == "stopped" {
			live = 0
		}
		s.Live, s.Missing = live, g.nodes-live
		for i := range g.nodes {
			n := state.NodeStatus{Node: fmt.Sprintf("fake-%s-%d", ng, i), State: state.NodeLive, Kubelet: true}
			if i >= live {
				n.State = state.NodeMissing
				s.Nodes = append(s.Nodes, n)
				continue
			}
			for _, it := range ix.NodeGroup(ng) {
				rev := nodepod.Revision(it.Entry)
				at := now.UTC()
				r := state.DeploymentReport{Name: it.Key.Name, Revision: rev, AppliedAt: &at, Desired: rev, Readiness: state.Ready, ReportedAt: at}
				switch g.state {
				case "not-ready":
					r.Readiness, r.Reason = state.NotReady, "kubelet reports the Pod not ready (fake)"
				case "error":
					r.Readiness, r.Reason = state.NotReady, "container web: CrashLoopBackOff (fake)"
					r.Error = &state.ReportedError{Kind: state.ErrorKubelet, Message: "container web: CrashLoopBackOff (fake)", Revision: rev}
				}
				n.Deployments = append(n.Deployments, r)
			}
			s.Nodes = append(s.Nodes, n)
		}
		data, err := s.Encode()
		if err != nil {
			return err
		}
		key, _ := state.NodeGroupStatusPath(ng)
		if _, err := f.store.Put(ctx, key, data); err != nil {
			return err
		}
		f.mu.Lock()
		f.published[ng] = publishedStatus{group: g, indexETag: etag}
		f.mu.Unlock()
	}
	return nil
}

// declare adds the fake nodes of NodeGroup ng. Agents that run have a
// leader: its lease is written at once, so a wait's first read finds it,
// as on a cluster whose nodes are up.
func (f *fakeNodes) declare(ctx context.Context, ng string, g fakeGroup) error {
	f.mu.Lock()
	f.groups[ng] = g
	f.mu.Unlock()
	return f.writeLease(ctx)
}

// index reads the deployments index, conditionally on the version read
// last; a missing index is the empty one.
func (f *fakeNodes) index(ctx context.Context) (*state.Index, string, error) {
	f.mu.Lock()
	ix, etag := f.ix, f.etag
	f.mu.Unlock()
	opts := objstore.GetOptions{}
	if ix != nil && etag != "" {
		opts.IfNoneMatch = etag
	}
	obj, err := f.store.Get(ctx, state.IndexPath, opts)
	switch {
	case errors.Is(err, objstore.ErrNotModified):
		return ix, etag, nil
	case errors.Is(err, objstore.ErrNotFound):
		return state.NewIndex(), "", nil
	case err != nil:
		return nil, "", fmt.Errorf("read %s: %w", state.IndexPath, err)
	}
	if ix, err = state.DecodeIndex(obj.Data); err != nil {
		return nil, "", err
	}
	f.mu.Lock()
	f.ix, f.etag = ix, obj.ETag
	f.mu.Unlock()
	return ix, obj.ETag, nil
}

// writeLease writes the fake leader's lease, renewed now.
func (f *fakeNodes) writeLease(ctx context.Context) error {
	now := f.Now()
	lease := fmt.Sprintf(`{"leaderID":"fake-leader","leaderAddr":"[2001:db8::1]:8081","lastUpdated":%q,"term":1}`, now.UTC().Format(time.RFC3339Nano))
	if _, err := f.store.Put(ctx, state.DNSLeaderPath, []byte(lease)); err != nil {
		return err
	}
	f.mu.Lock()
	f.leased = now
	f.mu.Unlock()
	return nil
}

// fakeNodesBuiltin is t.fake_nodes(nodegroup, nodes = 3, state = "ready").
func fakeNodesBuiltin(f *fakeNodes) *star.Builtin {
	return star.NewBuiltin("t.fake_nodes", func(thread *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
		var ng string
		nodes, st := 3, "ready"
		if err := star.UnpackArgs(b.Name(), args, kwargs, "nodegroup", &ng, "nodes?", &nodes, "state?", &st); err != nil {
			return nil, err
		}
		if err := ids.ValidateNodeGroup(ng); err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		}
		if nodes < 1 || nodes > 1000 {
			return nil, fmt.Errorf("%s: nodes = %d: use 1 to 1000", b.Name(), nodes)
		}
		if !slices.Contains(fakeStates, st) {
			return nil, fmt.Errorf("%s: state = %q: use one of %q", b.Name(), st, fakeStates)
		}
		if err := f.declare(threadContext(thread), ng, fakeGroup{nodes: nodes, state: st}); err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		}
		return star.None, nil
	})
}
