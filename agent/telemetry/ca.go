// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/pki"
)

// CARefreshInterval is how often the CA bundle is fetched again.
const CARefreshInterval = 5 * time.Minute

// MaxCABundle bounds the bundle object: a CA bundle is a few kilobytes.
const MaxCABundle = 1 << 20

// ErrInvalidBundle reports a CA bundle that is not CA-only PEM.
var ErrInvalidBundle = errors.New("invalid exporter CA bundle")

// ValidateCABundle accepts PEM holding only CERTIFICATE blocks, at least
// one, each a CA certificate (basic constraints CA:TRUE, and certificate
// signing when key usage is present), not all of them expired at now.
// Anything else — a leaf, a private key, garbage, an empty object — is
// refused with the reason.
func ValidateCABundle(data []byte, now time.Time) ([]*x509.Certificate, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: the object is empty", ErrInvalidBundle)
	}
	if len(data) > MaxCABundle {
		return nil, fmt.Errorf("%w: %d bytes is more than the %d a CA bundle may have", ErrInvalidBundle, len(data), MaxCABundle)
	}
	certs, err := pki.ParseCertsPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBundle, err)
	}
	current := false
	for i, c := range certs {
		if !c.BasicConstraintsValid || !c.IsCA {
			return nil, fmt.Errorf("%w: certificate %d (%q) is not a CA certificate: the bundle must hold only CA certificates", ErrInvalidBundle, i+1, c.Subject.CommonName)
		}
		if c.KeyUsage != 0 && c.KeyUsage&x509.KeyUsageCertSign == 0 {
			return nil, fmt.Errorf("%w: certificate %d (%q) may not sign certificates", ErrInvalidBundle, i+1, c.Subject.CommonName)
		}
		if now.Before(c.NotAfter) {
			current = true
		}
	}
	if !current {
		return nil, fmt.Errorf("%w: every certificate has expired", ErrInvalidBundle)
	}
	return certs, nil
}

// ObjectGetter reads one object (objstore.Store satisfies it).
type ObjectGetter interface {
	Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error)
}

// FetchObject returns a CABundleOptions.Fetch that reads exactly key from
// the bucket ca=s3://BUCKET/KEY names.
func FetchObject(bucket ObjectGetter, key string) func(ctx context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		o, err := bucket.Get(ctx, key, objstore.GetOptions{})
		if err != nil {
			return nil, err
		}
		return o.Data, nil
	}
}

// CABundleOptions configure a CABundle.
type CABundleOptions struct {
	// Fetch reads the exact S3 object named by ca=.
	Fetch func(ctx context.Context) ([]byte, error)
	// Path is where the bundle is installed (mode 0644: it is public).
	Path string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives why a refresh kept the last good bundle.
	Logger *slog.Logger
	// Interval between refreshes; zero means CARefreshInterval.
	Interval time.Duration
}

// CABundle keeps the exporter's private CA bundle installed: it is
// fetched and validated at start and every Interval; a valid new bundle
// replaces the file atomically, and any failure keeps the last good one.
type CABundle struct {
	opts CABundleOptions
}

// NewCABundle returns a CABundle; it does nothing until Refresh or Run.
func NewCABundle(opts CABundleOptions) *CABundle {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Interval <= 0 {
		opts.Interval = CARefreshInterval
	}
	return &CABundle{opts: opts}
}

// Refresh fetches, validates and installs the bundle once. It reports
// whether the installed file changed. On any error the installed file is
// left exactly as it was and the reason is logged.
func (b *CABundle) Refresh(ctx context.Context) (bool, error) {
	changed, err := b.refresh(ctx)
	if err != nil {
		_, statErr := os.Stat(b.opts.Path)
		b.opts.Logger.Warn("exporter CA bundle not updated; keeping the last good one",
			"path", b.opts.Path, "have_last_good", statErr == nil, "reason", err.Error())
	} else if changed {
		b.opts.Logger.Info("exporter CA bundle installed", "path", b.opts.Path)
	}
	return changed, err
}

func (b *CABundle) refresh(ctx context.Context) (bool, error) {
	data, err := b.opts.Fetch(ctx)
	if err != nil {
		return false, fmt.Errorf("fetch the CA bundle: %w", err)
	}
	if _, err := ValidateCABundle(data, b.opts.Now()); err != nil {
		return false, err
	}
	cur, err := os.ReadFile(b.opts.Path)
	if err == nil && bytes.Equal(cur, data) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read the installed bundle: %w", err)
	}
	if err := writeAtomic(b.opts.Path, data, 0o644); err != nil {
		return false, err
	}
	return true, nil
}

// Run refreshes at once and then every Interval until ctx ends. onChange,
// when set, is called after each change (the exporter rereads its CA
// only on start).
func (b *CABundle) Run(ctx context.Context, onChange func(context.Context)) {
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		if changed, _ := b.Refresh(ctx); changed && onChange != nil {
			onChange(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// writeAtomic writes data to path with perm atomically, creating the
// parent directory when missing.
func writeAtomic(path string, data []byte, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return paths.WriteFileAtomic(path, data, perm)
}
