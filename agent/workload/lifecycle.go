// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"podmin.dev/podmin/internal/pki"
)

// Forget removes the identity (symlink and generations) of every Pod not
// in keep, for Pods that left the node, and forgets its cached leaf in the
// same step. It covers every Pod it knows of, by its directory or its
// cache: a directory removed by someone else must not leave a cached
// leaf behind that would vouch for files that are gone.
func (m *Manager) Forget(keep []string) error {
	want := map[string]bool{}
	for _, k := range keep {
		want[k] = true
	}
	entries, err := os.ReadDir(m.workRoot)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	known := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && labelRE.MatchString(e.Name()) {
			known[e.Name()] = true
		}
	}
	m.mu.RLock()
	for name := range m.leaves {
		known[name] = true
	}
	m.mu.RUnlock()
	var errs []error
	for name := range known {
		if want[name] {
			continue
		}
		l := m.lock(name)
		l.Lock()
		dir := m.PodDir(name)
		errs = append(errs, os.Remove(filepath.Join(dir, LinkName)), os.RemoveAll(filepath.Join(dir, GenerationsDir)))
		m.mu.Lock()
		delete(m.leaves, name)
		m.mu.Unlock()
		l.Unlock()
	}
	var kept []error
	for _, e := range errs {
		if e != nil && !os.IsNotExist(e) {
			kept = append(kept, e)
		}
	}
	return errors.Join(kept...)
}

// Run refreshes the CA state every interval until ctx ends and calls poke
// whenever the bundle changed or a leaf is due, so the static-Pod
// reconciler runs an index-fenced pass even with an unchanged index. It
// wakes early for a leaf replacement due before the next interval, so a
// Pod restarts at its point of the restart window, not up to an interval
// later.
func (m *Manager) Run(ctx context.Context, interval time.Duration, poke func()) error {
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		changed, err := m.Refresh(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.Warn("workload CA refresh failed", "err", err)
		}
		if changed || m.Due() || m.anyMissing() {
			poke()
		}
		wait := interval
		if next, ok := m.NextDue(); ok {
			if d := next.Sub(m.opts.Now()); d > 0 && d < wait {
				wait = d
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}

// anyMissing reports whether the files of a remembered leaf are gone (the
// Pod's directory was removed under the agent): a pass then issues them
// again instead of leaving kubelet a hostPath that does not exist.
func (m *Manager) anyMissing() bool {
	m.mu.RLock()
	gens := make(map[string]string, len(m.leaves))
	for pod, l := range m.leaves {
		gens[pod] = l.gen
	}
	m.mu.RUnlock()
	for pod, gen := range gens {
		if !generationIntact(m.PodDir(pod), gen) {
			return true
		}
	}
	return false
}

// Leaf is a freshly issued leaf with its private key and the bundle that
// trusts it, for identities the agent keeps outside Pods (the log
// exporter's client leaf).
type Leaf struct {
	Cert   *x509.Certificate
	Key    ed25519.PrivateKey
	Bundle []byte
}

// IssueLeaf signs spec with the active workload CA, after the same checks
// as Pod leaves. The caller stores the key; it must stay on this node.
func (m *Manager) IssueLeaf(spec pki.LeafSpec) (Leaf, error) {
	m.mu.RLock()
	t := m.trust
	m.mu.RUnlock()
	if t == nil {
		return Leaf{}, fmt.Errorf("%w: issuing nothing until identity/ca.json has been read", ErrNoCA)
	}
	now := m.opts.Now()
	issuer, err := t.state.Issuer(now)
	if err != nil {
		return Leaf{}, err
	}
	key, err := pki.GenerateKey(m.opts.Random)
	if err != nil {
		return Leaf{}, err
	}
	cert, err := pki.Issue(m.opts.Random, issuer, m.opts.Key, key.Public().(ed25519.PublicKey), spec, now)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{Cert: cert, Key: key, Bundle: t.bundle}, nil
}
