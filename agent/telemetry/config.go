// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"podmin.dev/podmin/internal/otellogs"
	"podmin.dev/podmin/internal/scrub"
)

// ConfigOptions are the inputs of WriteConfig.
type ConfigOptions struct {
	// Options is the parsed --otel-logs value.
	Options otellogs.Options
	Node    otellogs.Node
	// Paths locate the state directory and the CA bundle; the certificate
	// paths are taken from Identity when mtls=true.
	Paths otellogs.Paths
	// Identity, with mtls=true, pins the configuration to its selected
	// generation.
	Identity *Identity
	// Headers reads /<cluster>/_system/otel-logs-headers; used only with
	// headers-secret=true.
	Headers func(ctx context.Context) ([]byte, error)
	// Path is the configuration file.
	Path string
	// Scrub receives every header value before anything can print it,
	// and every later error passes it; nil means the process's registry.
	Scrub  *scrub.Registry
	Logger *slog.Logger
}

// WriteConfig fetches the exporter headers, renders the Fluent Bit
// configuration pinned to the selected identity generation, and writes
// it atomically with mode 0600. It runs before every Fluent Bit start.
// Errors and log lines never hold a header value.
func WriteConfig(ctx context.Context, o ConfigOptions) error {
	reg := o.Scrub
	if reg == nil {
		reg = scrub.Process()
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	err := writeConfig(ctx, o, reg)
	if err != nil {
		err = reg.Error(err)
		log.Error("fluent-bit configuration not written", "path", o.Path, "error", err.Error())
		return err
	}
	log.Info("fluent-bit configuration written", "path", o.Path, "headers", o.Options.HeadersSecret, "mtls", o.Options.MTLS)
	return nil
}

func writeConfig(ctx context.Context, o ConfigOptions, reg *scrub.Registry) error {
	var headers map[string]string
	if o.Options.HeadersSecret {
		if o.Headers == nil {
			return errors.New("headers-secret=true but no way to read otel-logs-headers")
		}
		data, err := o.Headers(ctx)
		if err != nil {
			return fmt.Errorf("read otel-logs-headers: %w", err)
		}
		reg.Add("otel-logs-headers", data)
		if headers, err = otellogs.ParseHeaders(data); err != nil {
			return err
		}
		for k, v := range headers {
			reg.AddString("otel-logs-headers "+k, v)
		}
	}
	p := o.Paths
	if o.Options.MTLS {
		if o.Identity == nil {
			return errors.New("mtls=true needs the telemetry identity")
		}
		f, err := o.Identity.Current()
		if err != nil {
			return fmt.Errorf("mtls=true: %w: the agent issues it on its next maintenance pass", err)
		}
		p.CertFile, p.KeyFile = f.Cert, f.Key
	}
	data, err := otellogs.Render(o.Options, o.Node, headers, p)
	if err != nil {
		return err
	}
	return writeAtomic(o.Path, data, 0o600)
}
