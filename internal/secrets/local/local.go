// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/secrets"
)

// Store keeps secrets as files below one root directory (normally
// <Podmin data>/secrets).
type Store struct {
	root string
}

var _ secrets.NonceStore = (*Store)(nil)

// New returns the store rooted at dir; nothing is created until a write.
func New(dir string) *Store { return &Store{root: dir} }

// Provider implements secrets.Store.
func (*Store) Provider() string { return secrets.Local }

// Capabilities implements secrets.Store.
func (*Store) Capabilities() secrets.Capabilities { return secrets.LocalCapabilities }

func (s *Store) path(n secrets.Name) string {
	if n.Pod() == "" {
		return filepath.Join(s.root, n.Cluster(), n.Namespace(), n.Key())
	}
	return filepath.Join(s.root, n.Cluster(), n.Namespace(), n.Pod(), n.Key())
}

// nonceDir holds the create nonces, outside every cluster's directory so
// that no listing or agent sees them.
const nonceDir = ".create-nonces"

// noncePath is where the create nonce of n is kept: a file of its own,
// beside no secret.
func (s *Store) noncePath(n secrets.Name) string {
	rel, _ := filepath.Rel(s.root, s.path(n))
	return filepath.Join(s.root, nonceDir, rel)
}

// Create implements secrets.Store.
func (s *Store) Create(ctx context.Context, n secrets.Name, v secrets.Value) error {
	return s.write(ctx, n, v, true, "")
}

// CreateWithNonce implements secrets.NonceStore: the nonce is written, under
// the cluster's lock, before the secret, so a secret that exists carries it.
func (s *Store) CreateWithNonce(ctx context.Context, n secrets.Name, v secrets.Value, nonce string) error {
	if err := secrets.CheckNonce(nonce); err != nil {
		return err
	}
	return s.write(ctx, n, v, true, nonce)
}

// CreateNonce implements secrets.NonceStore.
func (s *Store) CreateNonce(_ context.Context, n secrets.Name) (string, error) {
	if n.IsZero() {
		return "", fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	// No lock: a read writes nothing. Writers record the nonce before the
	// secret and remove the secret before the nonce, so a secret seen here
	// has its record, and a race with a destroy reads no nonce at worst.
	if _, err := os.Lstat(s.path(n)); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("local: %s: %w", n, secrets.ErrNotFound)
	} else if err != nil {
		return "", fmt.Errorf("local: %s: %w", n, err)
	}
	b, err := os.ReadFile(s.noncePath(n))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("local: read the create nonce of %s: %w", n, err)
	}
	return string(b), nil
}

// Update implements secrets.Store.
func (s *Store) Update(ctx context.Context, n secrets.Name, v secrets.Value) error {
	return s.write(ctx, n, v, false, "")
}

// write stores v at n. A create records nonce (a create without one
// removes a nonce a crash left behind, so the new secret carries none).
func (s *Store) write(ctx context.Context, n secrets.Name, v secrets.Value, create bool, nonce string) error {
	if err := secrets.CheckValue(secrets.Local, s.Capabilities(), n, v); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := s.lock(n.Cluster())
	if err != nil {
		return err
	}
	defer unlock()
	p := s.path(n)
	_, err = os.Lstat(p)
	switch {
	case err == nil && create:
		return fmt.Errorf("local: %s: %w: use update to change its value", n, secrets.ErrExists)
	case errors.Is(err, fs.ErrNotExist) && !create:
		return fmt.Errorf("local: %s: %w: use create to add it", n, secrets.ErrNotFound)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("local: %s: %w", n, err)
	}
	if create {
		if err := s.writeNonce(n, nonce); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("local: %s: %w: fix the permissions of %s", n, err, s.root)
	}
	if err := paths.WriteFileAtomic(p, v, 0o600); err != nil {
		if create && nonce != "" {
			// No secret, so no record: nothing else may inherit it.
			_ = s.writeNonce(n, "")
		}
		return fmt.Errorf("local: %s: %w", n, err)
	}
	return nil
}

// writeNonce records nonce for n, or removes any record when nonce is "".
func (s *Store) writeNonce(n secrets.Name, nonce string) error {
	p := s.noncePath(n)
	if nonce == "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("local: %s: remove a stale create nonce: %w", n, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("local: %s: %w: fix the permissions of %s", n, err, s.root)
	}
	if err := paths.WriteFileAtomic(p, []byte(nonce), 0o600); err != nil {
		return fmt.Errorf("local: %s: record the create nonce: %w", n, err)
	}
	return nil
}

// Read implements secrets.Store.
func (s *Store) Read(_ context.Context, n secrets.Name) (secrets.Value, error) {
	if n.IsZero() {
		return nil, fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	b, err := os.ReadFile(s.path(n))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("local: %s: %w", n, secrets.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("local: %s: %w", n, err)
	}
	return b, nil
}

// tempFile matches the temporary files of paths.WriteFileAtomic (and of
// older versions, named after their secret), which a crash can leave
// behind; they are never secrets.
var tempFile = regexp.MustCompile(`^\..+\.tmp-[0-9]+$`)

func isTemp(name string) bool { return paths.IsTemp(name) || tempFile.MatchString(name) }

// List implements secrets.Store.
func (s *Store) List(ctx context.Context, cluster string, f secrets.Filter) ([]secrets.Entry, error) {
	if err := secrets.CheckFilter(cluster, f); err != nil {
		return nil, err
	}
	base := filepath.Join(s.root, cluster)
	dir := filepath.Join(s.root, filepath.FromSlash(strings.TrimSuffix(f.Prefix(cluster), "/")))
	var out []secrets.Entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return fs.SkipDir
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || isTemp(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		n, ok := f.Visible(cluster, "/"+cluster+"/"+filepath.ToSlash(rel))
		if !ok {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := n.Entry(secrets.Local)
		e.LastModified = info.ModTime().UTC()
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("local: list %s: %w", f.Prefix(cluster), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete implements secrets.Store: the local store has no recovery window.
func (s *Store) Delete(_ context.Context, n secrets.Name) error {
	if n.IsZero() {
		return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	return secrets.Unsupported(secrets.Local)
}

// Restore implements secrets.Store: the local store has no recovery window.
func (s *Store) Restore(ctx context.Context, n secrets.Name) error { return s.Delete(ctx, n) }

// Destroy implements secrets.Store. Emptied Pod and namespace directories
// are removed too.
func (s *Store) Destroy(ctx context.Context, n secrets.Name) error {
	if n.IsZero() {
		return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := s.lock(n.Cluster())
	if err != nil {
		return err
	}
	defer unlock()
	p := s.path(n)
	if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: %s: %w", n, secrets.ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("local: destroy %s: %w", n, err)
	}
	if err := paths.SyncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("local: destroy %s: %w", n, err)
	}
	// The secret is gone; its nonce record goes with it.
	if err := s.writeNonce(n, ""); err != nil {
		return err
	}
	// Best effort: a directory that is not empty stays.
	for d := filepath.Dir(p); d != filepath.Join(s.root, n.Cluster()); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
	return nil
}
