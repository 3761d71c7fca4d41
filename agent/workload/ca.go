// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"

	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

// Errors callers match with errors.Is.
var (
	// ErrSuperseded reports a leader write refused because identity/ca.json
	// (or the external copy) changed since it was read: another leader
	// acted. The next pass rereads.
	ErrSuperseded = errors.New("superseded by a newer workload CA state")
	// ErrNoCA reports that no usable workload CA state has been read yet.
	ErrNoCA = errors.New("no workload CA state")
)

// Leader reports whether this agent is the elected leader: only the
// elected leader creates or rotates identity/ca.json (the coordinator's
// election.Elector is one).
type Leader interface {
	IsLeader() bool
}

// Always is the Leader of an agent that is alone by construction (tests).
type Always struct{}

// IsLeader implements Leader.
func (Always) IsLeader() bool { return true }

// Never is the Leader of an agent that takes no part in the election
// (no cluster CA, so no coordination): it reads identity/ca.json but
// never creates or rotates it.
type Never struct{}

// IsLeader implements Leader.
func (Never) IsLeader() bool { return false }

// KeyReader reads one secret; every secrets provider satisfies it.
type KeyReader interface {
	Read(ctx context.Context, name secrets.Name) (secrets.Value, error)
}

// ReadKey reads the cluster's workload CA key from its secrets provider.
// The key stays in the caller's memory; a malformed value is refused.
func ReadKey(ctx context.Context, r KeyReader, cluster string) (ed25519.PrivateKey, error) {
	name, err := secrets.InternalSecret(cluster, secrets.WorkloadCAKey)
	if err != nil {
		return nil, err
	}
	v, err := r.Read(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read the workload CA key %s: %w: run podmin setup to create it", name, err)
	}
	k, err := pki.ParseWorkloadKey(v)
	if err != nil {
		return nil, fmt.Errorf("workload CA key %s: %w", name, err)
	}
	return k, nil
}

// trust is one validated CA state as the agent uses it.
type trust struct {
	state  pki.CAState
	etag   string
	bundle []byte   // ca.crt
	hash   [32]byte // of bundle: changes exactly when ca.crt changes
}

func newTrust(s pki.CAState, etag string) *trust {
	b := s.BundlePEM()
	return &trust{state: s, etag: etag, bundle: b, hash: sha256.Sum256(b)}
}

// Refresh rotates the CA when this agent leads, then reads identity/ca.json
// (a conditional read when nothing changed). It reports whether the trust
// bundle changed. A document that fails validation is logged and refused:
// the last good state stays in use and nothing is issued from the bad one.
func (m *Manager) Refresh(ctx context.Context) (changed bool, err error) {
	var rotErr error
	if m.opts.Leader.IsLeader() {
		rotErr = m.Rotate(ctx)
		if rotErr != nil {
			m.log.Warn("workload CA rotation failed", "err", rotErr)
		}
	}
	m.mu.RLock()
	cur := m.trust
	m.mu.RUnlock()
	etag := ""
	if cur != nil {
		etag = cur.etag
	}
	obj, err := m.opts.Store.Get(ctx, state.IdentityCAPath, getOpts(etag))
	switch {
	case isNotModified(err):
		return false, rotErr
	case isNotFound(err):
		return false, errors.Join(rotErr, fmt.Errorf("%w: %s does not exist yet: the elected leader creates it", ErrNoCA, state.IdentityCAPath))
	case err != nil:
		return false, errors.Join(rotErr, fmt.Errorf("read %s: %w", state.IdentityCAPath, err))
	}
	s, err := pki.ParseCAState(obj.Data, m.opts.Key)
	if err != nil {
		m.log.Error("refusing workload CA state: keeping the last good one, issuing nothing from it", "etag", obj.ETag, "err", err)
		return false, errors.Join(rotErr, err)
	}
	t := newTrust(s, obj.ETag)
	m.mu.Lock()
	changed = m.trust == nil || m.trust.hash != t.hash
	m.trust = t
	m.mu.Unlock()
	if changed {
		m.log.Info("workload CA bundle changed", "etag", obj.ETag, "certificates", len(s.Certs()))
	}
	return changed, rotErr
}

// Rotate is one leader pass over identity/ca.json: it applies
// pki.PlanRotation and writes with compare-and-swap, publishing the
// external copy first where the rule requires it. A concurrent leader's
// write makes it fail with ErrSuperseded.
func (m *Manager) Rotate(ctx context.Context) error {
	now := m.opts.Now()
	m.leaderMu.Lock()
	defer m.leaderMu.Unlock()
	var cur *pki.CAState
	etag := ""
	obj, err := m.opts.Store.Get(ctx, state.IdentityCAPath, getOpts(m.leaderETag))
	switch {
	case isNotModified(err) && m.leaderState != nil:
		cur, etag = m.leaderState, m.leaderETag
	case isNotFound(err):
	case err != nil:
		return fmt.Errorf("read %s: %w", state.IdentityCAPath, err)
	default:
		s, err := pki.ParseCAState(obj.Data, m.opts.Key)
		if err != nil {
			return fmt.Errorf("refusing to rotate over an invalid %s (fix or remove it): %w", state.IdentityCAPath, err)
		}
		cur, etag = &s, obj.ETag
		m.leaderState, m.leaderETag = cur, etag
	}
	ext := m.opts.External
	observed := false
	if ext != nil && cur != nil {
		if observed, err = m.externalHolds(ctx, cur.BundlePEM()); err != nil {
			return err
		}
	}
	plan, err := pki.PlanRotation(pki.RotationInput{
		Current: cur, Now: now, External: ext != nil, Observed: observed,
		NewCA: func() (*x509.Certificate, error) {
			return pki.NewCA(m.opts.Random, m.opts.Key, pki.WorkloadCASpec(m.opts.Cluster), now)
		},
	})
	if err != nil {
		return err
	}
	final := cur
	if plan.Write {
		if plan.PublishFirst && ext != nil {
			if err := m.publishExternal(ctx, plan.Next.BundlePEM()); err != nil {
				return fmt.Errorf("%s: %w", plan.Reason, err)
			}
		}
		data, err := plan.Next.Marshal()
		if err != nil {
			return err
		}
		newETag, err := putCAS(ctx, m.opts.Store, state.IdentityCAPath, data, etag)
		if err != nil {
			return fmt.Errorf("write %s (%s): %w", state.IdentityCAPath, plan.Reason, err)
		}
		m.log.Info("workload CA state written", "reason", plan.Reason, "etag", newETag)
		final = &plan.Next
		m.leaderState, m.leaderETag = final, newETag
	}
	if ext != nil && final != nil && (plan.Write || !observed) {
		return m.publishExternal(ctx, final.BundlePEM())
	}
	return nil
}

// externalHolds reports whether the external copy holds exactly bundle.
func (m *Manager) externalHolds(ctx context.Context, bundle []byte) (bool, error) {
	ext := m.opts.External
	obj, err := ext.Store.Get(ctx, ext.Key, getOpts(""))
	switch {
	case isNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the external workload CA bundle %s: %w", ext.Key, err)
	}
	return bytes.Equal(obj.Data, bundle), nil
}

// publishExternal makes the external copy hold exactly bundle (replacing
// it with compare-and-swap) and observes it there.
func (m *Manager) publishExternal(ctx context.Context, bundle []byte) error {
	ext := m.opts.External
	obj, err := ext.Store.Get(ctx, ext.Key, getOpts(""))
	switch {
	case isNotFound(err):
	case err != nil:
		return fmt.Errorf("read the external workload CA bundle %s: %w", ext.Key, err)
	case bytes.Equal(obj.Data, bundle):
		return nil
	}
	if _, err := putCAS(ctx, ext.Store, ext.Key, bundle, obj.ETag); err != nil {
		return fmt.Errorf("publish the external workload CA bundle %s: %w", ext.Key, err)
	}
	ok, err := m.externalHolds(ctx, bundle)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: the external workload CA bundle %s changed right after it was written", ErrSuperseded, ext.Key)
	}
	m.log.Info("external workload CA bundle published", "key", ext.Key)
	return nil
}
