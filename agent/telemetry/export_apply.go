// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"podmin.dev/podmin/internal/secrets"
)

// apply writes the configuration and restarts Fluent Bit when force is
// set or the configuration changed.
func (l *Export) apply(ctx context.Context, force bool, why string) (err error) {
	defer func() {
		l.cfgMu.Lock()
		l.failed = err != nil
		l.cfgMu.Unlock()
	}()
	changed, err := l.rewrite(ctx)
	if err != nil {
		return err
	}
	if !force && !changed {
		l.report("fluent-bit", nil)
		return nil
	}
	if l.restart == nil {
		l.log.Info("fluent-bit configuration current; no restart configured", "reason", why)
		l.report("fluent-bit", nil)
		return nil
	}
	// The restart runs without cfgMu: the unit's ExecStartPre asks this
	// agent to write the configuration (ServeHTTP) while systemctl waits.
	if err := l.restart(ctx); err != nil {
		err = fmt.Errorf("restart Fluent Bit (%s): %w", why, err)
		l.log.Error("fluent-bit not restarted", "err", err)
		l.report("fluent-bit", err)
		return err
	}
	l.log.Info("fluent-bit restarted", "reason", why)
	l.report("fluent-bit", nil)
	return nil
}

// rewrite writes the configuration and reports whether it changed.
func (l *Export) rewrite(ctx context.Context) (bool, error) {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	before, _ := os.ReadFile(l.export.Path)
	if err := l.write(ctx); err != nil {
		return false, err
	}
	after, _ := os.ReadFile(l.export.Path)
	return !bytes.Equal(before, after), nil
}

// fetchCA reads the exact ca= object: from the cluster bucket itself when
// it names it, otherwise from that bucket of the same provider.
func (l *Export) fetchCA(bucket, key string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		b := l.opts.Store
		if bucket != l.opts.Bucket {
			if l.opts.OpenBucket == nil {
				return nil, fmt.Errorf("the CA bundle is in bucket %s, which this agent cannot open: keep it in the cluster bucket", bucket)
			}
			ob, err := l.opts.OpenBucket(ctx, bucket)
			if err != nil {
				return nil, err
			}
			b = ob
		}
		return FetchObject(b, key)(ctx)
	}
}

// readHeaders reads /<cluster>/_system/otel-logs-headers: from the local
// secrets store, or on AWS from Parameter Store and then Secrets Manager.
func (l *Export) readHeaders(ctx context.Context) ([]byte, error) {
	name, err := secrets.SystemSecret(l.opts.Cluster, secrets.OtelLogsHeaders)
	if err != nil {
		return nil, err
	}
	if l.opts.Local {
		r, ok := l.opts.Readers[secrets.Local]
		if !ok {
			return nil, errors.New("the Podmin data directory holding the local secrets store is unknown; set XDG_DATA_HOME")
		}
		return r.Get(ctx, name.String())
	}
	var errs []error
	for _, provider := range []string{secrets.ParameterStore, secrets.SecretsManager} {
		v, err := l.opts.Readers[provider].Get(ctx, name.String())
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", provider, err))
	}
	return nil, errors.Join(errs...)
}
