// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultAddress is the only address the node registry binds by default:
// loopback, so only the node's containerd reaches it.
const DefaultAddress = "127.0.0.1:5000"

// Listen binds addr, or DefaultAddress when addr is empty.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	if addr == "" {
		addr = DefaultAddress
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("registry: listen on %s: %w: is another registry or agent running?", addr, err)
	}
	return l, nil
}

// Serve serves h on l until ctx ends, then shuts down gracefully for up
// to five seconds. It returns nil after a shutdown caused by ctx.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return fmt.Errorf("registry: serve %s: %w", l.Addr(), err)
}

// parseRange reads a single "bytes=" range against size and returns the
// start and length. Multiple ranges are not served.
func parseRange(spec string, size int64) (start, length int64, ok bool) {
	r, found := strings.CutPrefix(spec, "bytes=")
	if !found || strings.Contains(r, ",") {
		return 0, 0, false
	}
	first, last, found := strings.Cut(strings.TrimSpace(r), "-")
	if !found {
		return 0, 0, false
	}
	if first == "" { // suffix range: the last N bytes
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n <= 0 || size == 0 {
			return 0, 0, false
		}
		n = min(n, size)
		return size - n, n, true
	}
	s, err := strconv.ParseInt(first, 10, 64)
	if err != nil || s < 0 || s >= size {
		return 0, 0, false
	}
	e := size - 1
	if last != "" {
		if e, err = strconv.ParseInt(last, 10, 64); err != nil || e < s {
			return 0, 0, false
		}
		e = min(e, size-1)
	}
	return s, e - s + 1, true
}
