// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// objectsOf picks the streaming reader for the bucket's store: files
// for a local bucket, ranged GetObject for S3.
func objectsOf(store objstore.Store) Objects {
	switch b := store.(type) {
	case *localstore.Bucket:
		return LocalObjects(b)
	case *s3store.Bucket:
		return S3Objects(b, b.Client(), b.Name())
	}
	return StoreObjects(store)
}

// Server is the node's read-only OCI registry on loopback, from which
// containerd pulls cluster images; it is one of the agent's serving
// components.
type Server struct {
	addr    string
	setting string
	handler *Handler
	log     *slog.Logger
	bound   string
	// serves holds bound while the listener accepts connections.
	serves atomic.Pointer[string]
	cancel context.CancelFunc
	done   chan error
}

// NewServer serves store's images at addr, a loopback address; setting
// names where addr was configured, for errors.
func NewServer(addr, setting string, store objstore.Store, log *slog.Logger) *Server {
	return &Server{addr: addr, setting: setting, log: log,
		handler: New(objectsOf(store), WithLogger(log.With("component", "registry")))}
}

// Handler serves the registry's API; its metrics are the handler's.
func (s *Server) Handler() *Handler { return s.handler }

// Bound is the address the server listens on once started.
func (s *Server) Bound() string { return s.bound }

func (s *Server) Name() string { return "registry" }

func (s *Server) Start(ctx context.Context) error {
	if err := health.CheckLoopback("registry", s.addr); err != nil {
		return fmt.Errorf("%s: %w", s.setting, err)
	}
	l, err := Listen(ctx, s.addr)
	if err != nil {
		return err
	}
	s.bound = l.Addr().String()
	s.serves.Store(&s.bound)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- Serve(sctx, l, s.handler) }()
	s.log.Info("serving the read-only registry", "addr", s.bound)
	return nil
}

// Serving is the server's address while it serves, "" before it
// listens, after it stopped, and without a server (s nil): the
// coordinator tells by it a pull refused while the agent was down.
func (s *Server) Serving() string {
	if s == nil {
		return ""
	}
	if p := s.serves.Load(); p != nil {
		return *p
	}
	return ""
}

func (s *Server) Stop(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.serves.Store(nil)
	s.cancel()
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
