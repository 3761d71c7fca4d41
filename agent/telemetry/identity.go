// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/pki"
)

// Issuer signs leaves with the active workload CA (workload.Manager).
type Issuer interface {
	IssueLeaf(spec pki.LeafSpec) (workload.Leaf, error)
}

// File names inside Dir.
const (
	// CurrentLink is the relative symlink selecting the generation.
	CurrentLink = "current"
	// GenerationsDir holds the immutable generations.
	GenerationsDir = "identity-generations"
	CertFile       = "tls.crt"
	KeyFile        = "tls.key"
	// BundleFile is the workload CA bundle the leaf was issued under.
	BundleFile = "ca.crt"
)

// IdentityOptions configure an Identity.
type IdentityOptions struct {
	// Dir is the telemetry tmpfs subtree, /run/podmin/telemetry.
	Dir string
	// Cluster and NodeID name the leaf:
	// spiffe://<cluster>.podmin.internal/system/otel-logs/node/<node-id>.
	Cluster, NodeID string
	Issuer          Issuer
	// Roots returns the current workload CA certificates a valid leaf must
	// chain to; nil checks against the bundle stored with the generation.
	Roots func() []*x509.Certificate
	// UID and GID own the files (Fluent Bit's user); -1 means this
	// process's.
	UID, GID int
	// Restart restarts Fluent Bit onto the new generation.
	Restart func(ctx context.Context) error
	Now     func() time.Time
	Logger  *slog.Logger
}

// Identity maintains Fluent Bit's client-only leaf in mode 0600 files of
// an atomically selected generation.
type Identity struct {
	opts IdentityOptions
	spec pki.LeafSpec
}

// NewIdentity checks the options.
func NewIdentity(opts IdentityOptions) (*Identity, error) {
	if opts.Dir == "" || opts.Issuer == nil || opts.Cluster == "" {
		return nil, errors.New("telemetry identity needs a directory, a cluster and an issuer")
	}
	if opts.NodeID == "" || strings.ContainsAny(opts.NodeID, "/ \\") || opts.NodeID == "." || opts.NodeID == ".." {
		return nil, fmt.Errorf("telemetry identity: node ID %q is not one path segment", opts.NodeID)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.UID < 0 {
		opts.UID = os.Getuid()
	}
	if opts.GID < 0 {
		opts.GID = os.Getgid()
	}
	return &Identity{opts: opts, spec: pki.TelemetryLeaf(opts.Cluster, opts.NodeID)}, nil
}

// Files are one generation's concrete paths, for the Fluent Bit
// configuration: a restart then runs on exactly that generation.
type Files struct {
	Generation string
	Cert, Key  string
}

// MaintainResult reports a maintenance pass.
type MaintainResult struct {
	Files
	// Renewed is true when a new generation was issued; Reason says why.
	Renewed bool
	Reason  string
}

// Maintain validates the selected generation — files, modes, owner, key
// pair, names, usages, chain and remaining lifetime — and replaces it with
// a freshly issued one when anything is wrong or it expires within
// pki.RenewBefore; then it calls Restart.
func (id *Identity) Maintain(ctx context.Context) (MaintainResult, error) {
	cur, err := id.Current()
	if err == nil {
		if err = id.check(cur); err == nil {
			return MaintainResult{Files: cur}, nil
		}
	}
	reason := err.Error()
	files, err := id.issue(cur.Generation)
	if err != nil {
		id.opts.Logger.Error("telemetry identity not renewed", "reason", reason, "error", err.Error())
		return MaintainResult{Files: cur}, err
	}
	id.opts.Logger.Info("telemetry identity renewed", "generation", files.Generation, "reason", reason)
	res := MaintainResult{Files: files, Renewed: true, Reason: reason}
	if id.opts.Restart != nil {
		if err := id.opts.Restart(ctx); err != nil {
			return res, fmt.Errorf("restart Fluent Bit onto generation %s: %w", files.Generation, err)
		}
	}
	return res, nil
}

// Run maintains the identity at once and then every interval until ctx
// ends; failures are logged by Maintain and retried on the next pass.
func (id *Identity) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_, _ = id.Maintain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Current resolves the selected generation.
func (id *Identity) Current() (Files, error) {
	target, err := os.Readlink(filepath.Join(id.opts.Dir, CurrentLink))
	if err != nil {
		return Files{}, fmt.Errorf("no selected generation: %w", err)
	}
	gen := filepath.Base(target)
	if target != filepath.Join(GenerationsDir, gen) {
		return Files{}, fmt.Errorf("%s points at %q, outside %s", CurrentLink, target, GenerationsDir)
	}
	dir := filepath.Join(id.opts.Dir, GenerationsDir, gen)
	return Files{Generation: gen, Cert: filepath.Join(dir, CertFile), Key: filepath.Join(dir, KeyFile)}, nil
}

func (id *Identity) check(f Files) error {
	var data [3][]byte
	for i, p := range []string{f.Cert, f.Key, filepath.Join(filepath.Dir(f.Cert), BundleFile)} {
		st, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("generation %s: %w", f.Generation, err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
			return fmt.Errorf("generation %s: %s has mode %v, want a regular file with 0600", f.Generation, filepath.Base(p), st.Mode())
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && (int(sys.Uid) != id.opts.UID || int(sys.Gid) != id.opts.GID) {
			return fmt.Errorf("generation %s: %s is owned by %d:%d, want %d:%d", f.Generation, filepath.Base(p), sys.Uid, sys.Gid, id.opts.UID, id.opts.GID)
		}
		if data[i], err = os.ReadFile(p); err != nil {
			return fmt.Errorf("generation %s: %w", f.Generation, err)
		}
	}
	certs, err := pki.ParseCertsPEM(data[0])
	if err != nil || len(certs) != 1 {
		return fmt.Errorf("generation %s: %s is not one certificate: %v", f.Generation, CertFile, err)
	}
	key, err := pki.ParseKeyPEM(data[1])
	if err != nil {
		return fmt.Errorf("generation %s: %s: %w", f.Generation, KeyFile, err)
	}
	var roots []*x509.Certificate
	if id.opts.Roots != nil {
		roots = id.opts.Roots()
	} else if roots, err = pki.ParseCertsPEM(data[2]); err != nil {
		return fmt.Errorf("generation %s: %s: %w", f.Generation, BundleFile, err)
	}
	now := id.opts.Now()
	if err := pki.CheckLeaf(certs[0], key, id.spec, roots, now); err != nil {
		return fmt.Errorf("generation %s: %w", f.Generation, err)
	}
	if left := certs[0].NotAfter.Sub(now); left <= pki.RenewBefore {
		return fmt.Errorf("generation %s expires in %s, within the %s renewal window", f.Generation, left.Round(time.Second), pki.RenewBefore)
	}
	return nil
}

// issue writes a new generation, selects it and removes every generation
// but it and previous.
func (id *Identity) issue(previous string) (Files, error) {
	leaf, err := id.opts.Issuer.IssueLeaf(id.spec)
	if err != nil {
		return Files{}, fmt.Errorf("issue the telemetry leaf: %w", err)
	}
	if slices.Contains(leaf.Cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(leaf.Cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return Files{}, fmt.Errorf("the issued telemetry leaf has usages %v: it must be client-only", leaf.Cert.ExtKeyUsage)
	}
	keyPEM, err := pki.EncodeKeyPEM(leaf.Key)
	if err != nil {
		return Files{}, err
	}
	gens := filepath.Join(id.opts.Dir, GenerationsDir)
	if err := os.MkdirAll(gens, 0o755); err != nil {
		return Files{}, err
	}
	gen := fmt.Sprintf("%d-%s", id.opts.Now().UnixNano(), pki.Fingerprint(leaf.Cert)[:12])
	tmp, err := os.MkdirTemp(gens, ".tmp-")
	if err != nil {
		return Files{}, err
	}
	defer os.RemoveAll(tmp)
	for name, content := range map[string][]byte{CertFile: pki.EncodeCertPEM(leaf.Cert.Raw), KeyFile: keyPEM, BundleFile: leaf.Bundle} {
		if err := id.writeFile(filepath.Join(tmp, name), content); err != nil {
			return Files{}, err
		}
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return Files{}, err
	}
	if err := os.Chown(tmp, id.opts.UID, id.opts.GID); err != nil {
		return Files{}, err
	}
	if err := paths.SyncDir(tmp); err != nil {
		return Files{}, err
	}
	if err := os.Rename(tmp, filepath.Join(gens, gen)); err != nil {
		return Files{}, err
	}
	if err := paths.SyncDir(gens); err != nil {
		return Files{}, err
	}
	link := filepath.Join(id.opts.Dir, CurrentLink)
	tmpLink := link + ".tmp"
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Join(GenerationsDir, gen), tmpLink); err != nil {
		return Files{}, err
	}
	if err := os.Rename(tmpLink, link); err != nil {
		return Files{}, err
	}
	if err := paths.SyncDir(id.opts.Dir); err != nil {
		return Files{}, err
	}
	id.prune(gens, gen, previous)
	files, err := id.Current()
	return files, err
}

func (id *Identity) writeFile(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err = f.Chmod(0o600); err == nil {
		err = f.Chown(id.opts.UID, id.opts.GID)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// prune keeps the selected generation and the one it replaced.
func (id *Identity) prune(gens, keep, previous string) {
	entries, err := os.ReadDir(gens)
	if err != nil {
		return
	}
	for _, e := range entries {
		if n := e.Name(); n != keep && n != previous && !strings.HasPrefix(n, ".tmp-") {
			if err := os.RemoveAll(filepath.Join(gens, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				id.opts.Logger.Warn("old telemetry generation not removed", "generation", n, "error", err.Error())
			}
		}
	}
}
