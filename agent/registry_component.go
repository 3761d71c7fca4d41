// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"log/slog"

	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// registryObjects picks the streaming reader for the bucket's store: files
// for a local bucket, ranged GetObject for S3.
func registryObjects(store objstore.Store) registry.Objects {
	switch b := store.(type) {
	case *localstore.Bucket:
		return registry.LocalObjects(b)
	case *s3store.Bucket:
		return registry.S3Objects(b, b.Client(), b.Name())
	}
	return registry.StoreObjects(store)
}

// registryServer is the node's read-only OCI registry on loopback, from
// which containerd pulls cluster images.
type registryServer struct {
	addr    string
	handler *registry.Handler
	log     *slog.Logger
	bound   string
	cancel  context.CancelFunc
	done    chan error
}

func newRegistryServer(addr string, store objstore.Store, log *slog.Logger) *registryServer {
	return &registryServer{addr: addr, log: log,
		handler: registry.New(registryObjects(store), registry.WithLogger(log.With("component", "registry")))}
}

func (s *registryServer) Name() string { return "registry" }

func (s *registryServer) Start(ctx context.Context) error {
	if err := health.CheckLoopback("registry", s.addr); err != nil {
		return fmt.Errorf("%s: %w", EnvRegistryAddr, err)
	}
	l, err := registry.Listen(ctx, s.addr)
	if err != nil {
		return err
	}
	s.bound = l.Addr().String()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- registry.Serve(sctx, l, s.handler) }()
	s.log.Info("serving the read-only registry", "addr", s.bound)
	return nil
}

func (s *registryServer) Stop(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
