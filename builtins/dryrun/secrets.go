// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore/overlay"
	"podmin.dev/podmin/internal/secrets"
)

// openSecrets opens the real provider once per provider and location and
// wraps it in a recording store.
func (r *Recorder) openSecrets(ctx context.Context, c contexts.Context, name string) (secrets.Store, error) {
	key := name + "\x00" + c.Provider + "\x00" + c.Region + "\x00" + c.Profile
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.secrets[key]; ok {
		return s, nil
	}
	real, err := r.real.Secrets(ctx, c, name)
	if err != nil {
		return nil, err
	}
	s := &secretStore{real: real, seq: &r.seq, now: r.now, layer: map[string]*secretState{}}
	r.secrets[key] = s
	r.sources = append(r.sources, s)
	return s, nil
}

// hintScheduled is what to do about a secret scheduled for deletion.
const hintScheduled = "use restore to cancel the deletion, or destroy to delete it now"

// secretState is the overlay's state of one secret. The value is kept so
// that later reads in the same run see it; it is never recorded.
type secretState struct {
	name      secrets.Name
	exists    bool
	scheduled time.Time
	value     secrets.Value
	modified  time.Time
	// nonce is the create nonce when nonceSet (a create in this run);
	// otherwise the real store's holds.
	nonce    string
	nonceSet bool
}

var _ secrets.NonceStore = (*secretStore)(nil)

// secretStore is a recording, copy-on-write secrets.Store.
type secretStore struct {
	real secrets.Store
	seq  *overlay.Sequence
	now  func() time.Time

	mu    sync.Mutex
	layer map[string]*secretState
	recs  []record
}

func (s *secretStore) Provider() string                   { return s.real.Provider() }
func (s *secretStore) Capabilities() secrets.Capabilities { return s.real.Capabilities() }

// current is the merged state of n; the caller holds s.mu.
func (s *secretStore) current(ctx context.Context, n secrets.Name) (*secretState, error) {
	if st, ok := s.layer[n.String()]; ok {
		c := *st
		return &c, nil
	}
	st := &secretState{name: n}
	v, err := s.real.Read(ctx, n)
	switch {
	case err == nil:
		st.exists, st.value = true, v
	case errors.Is(err, secrets.ErrNotFound):
	case errors.Is(err, secrets.ErrScheduledForDeletion):
		st.exists, st.scheduled = true, s.now()
	default:
		return nil, err
	}
	return st, nil
}

// change applies fn to the merged state of n and records the action.
func (s *secretStore) change(ctx context.Context, n secrets.Name, action string, fn func(st *secretState) error) error {
	if n.IsZero() {
		return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.current(ctx, n)
	if err != nil {
		return err
	}
	before := state{exists: st.exists && st.scheduled.IsZero()}
	if err := fn(st); err != nil {
		return err
	}
	s.layer[n.String()] = st
	s.recs = append(s.recs, record{seq: s.seq.Next(), kind: KindSecret, where: "secrets provider " + s.Provider(),
		target: n.String(), action: action, before: before, after: state{exists: st.exists && st.scheduled.IsZero()}})
	return nil
}

func (s *secretStore) Create(ctx context.Context, n secrets.Name, v secrets.Value) error {
	if err := secrets.CheckValue(s.Provider(), s.Capabilities(), n, v); err != nil {
		return err
	}
	return s.change(ctx, n, Created, func(st *secretState) error {
		switch {
		case !st.scheduled.IsZero():
			return fmt.Errorf("%s: %w: %s", n, secrets.ErrScheduledForDeletion, hintScheduled)
		case st.exists:
			return fmt.Errorf("%s: %w: use update to change its value", n, secrets.ErrExists)
		}
		st.exists, st.value, st.modified = true, append(secrets.Value(nil), v...), s.now()
		st.nonce, st.nonceSet = "", true
		return nil
	})
}

// CreateWithNonce is Create that keeps nonce in the overlay, as the real
// store would keep it with the secret.
func (s *secretStore) CreateWithNonce(ctx context.Context, n secrets.Name, v secrets.Value, nonce string) error {
	if err := secrets.CheckNonce(nonce); err != nil {
		return err
	}
	if err := s.Create(ctx, n, v); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.layer[n.String()]
	st.nonce = nonce
	return nil
}

// CreateNonce returns the nonce a create in this run stored, or else the
// real store's; a real store that keeps none reports none.
func (s *secretStore) CreateNonce(ctx context.Context, n secrets.Name) (string, error) {
	if n.IsZero() {
		return "", fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.current(ctx, n)
	switch {
	case err != nil:
		return "", err
	case !st.exists:
		return "", fmt.Errorf("%s: %w", n, secrets.ErrNotFound)
	case st.nonceSet:
		return st.nonce, nil
	}
	if ns, ok := s.real.(secrets.NonceStore); ok {
		return ns.CreateNonce(ctx, n)
	}
	return "", nil
}

func (s *secretStore) Update(ctx context.Context, n secrets.Name, v secrets.Value) error {
	if err := secrets.CheckValue(s.Provider(), s.Capabilities(), n, v); err != nil {
		return err
	}
	return s.change(ctx, n, Updated, func(st *secretState) error {
		switch {
		case !st.exists:
			return fmt.Errorf("%s: %w: use create to add it", n, secrets.ErrNotFound)
		case !st.scheduled.IsZero():
			return fmt.Errorf("%s: %w: %s", n, secrets.ErrScheduledForDeletion, hintScheduled)
		}
		st.value, st.modified = append(secrets.Value(nil), v...), s.now()
		return nil
	})
}

func (s *secretStore) Read(ctx context.Context, n secrets.Name) (secrets.Value, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.current(ctx, n)
	switch {
	case err != nil:
		return nil, err
	case !st.exists:
		return nil, fmt.Errorf("%s: %w", n, secrets.ErrNotFound)
	case !st.scheduled.IsZero():
		return nil, fmt.Errorf("%s: %w: %s", n, secrets.ErrScheduledForDeletion, hintScheduled)
	}
	return append(secrets.Value(nil), st.value...), nil
}

func (s *secretStore) Delete(ctx context.Context, n secrets.Name) error {
	if s.Capabilities().RecoveryWindowDays == 0 {
		if n.IsZero() {
			return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
		}
		return secrets.Unsupported(s.Provider())
	}
	return s.change(ctx, n, Scheduled, func(st *secretState) error {
		switch {
		case !st.exists:
			return fmt.Errorf("%s: %w", n, secrets.ErrNotFound)
		case !st.scheduled.IsZero():
			return fmt.Errorf("%s: %w: it is already scheduled: use restore to cancel, or destroy to delete it now", n, secrets.ErrScheduledForDeletion)
		}
		st.scheduled = s.now()
		return nil
	})
}

func (s *secretStore) Restore(ctx context.Context, n secrets.Name) error {
	if s.Capabilities().RecoveryWindowDays == 0 {
		if n.IsZero() {
			return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
		}
		return secrets.Unsupported(s.Provider())
	}
	return s.change(ctx, n, Restored, func(st *secretState) error {
		if !st.exists {
			return fmt.Errorf("%s: %w", n, secrets.ErrNotFound)
		}
		st.scheduled = time.Time{}
		return nil
	})
}

func (s *secretStore) Destroy(ctx context.Context, n secrets.Name) error {
	return s.change(ctx, n, Destroyed, func(st *secretState) error {
		if !st.exists {
			return fmt.Errorf("%s: %w", n, secrets.ErrNotFound)
		}
		*st = secretState{name: n}
		return nil
	})
}

// List merges the real listing with the secrets changed in this run.
func (s *secretStore) List(ctx context.Context, cluster string, f secrets.Filter) ([]secrets.Entry, error) {
	real, err := s.real.List(ctx, cluster, f)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byName := map[string]secrets.Entry{}
	for _, e := range real {
		byName[e.Name] = e
	}
	for name, st := range s.layer {
		n, ok := f.Visible(cluster, name)
		if !ok {
			continue
		}
		if !st.exists {
			delete(byName, name)
			continue
		}
		e := n.Entry(s.Provider())
		if old, ok := byName[name]; ok {
			e = old
		}
		if !st.modified.IsZero() {
			e.LastModified = st.modified.UTC()
		}
		e.DeletionScheduled = st.scheduled
		byName[name] = e
	}
	out := make([]secrets.Entry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *secretStore) records() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.recs...)
}

// netSecretAction names the net effect of a run of secret records.
func netSecretAction(first, last record, n int) string {
	b, a := first.before.exists, last.after.exists
	switch {
	case n == 1:
		return first.action
	case !b && a:
		return Created
	case b && !a && last.action == Scheduled:
		return Scheduled
	case b && !a:
		return Destroyed
	case b && a:
		return Updated
	}
	return ""
}
