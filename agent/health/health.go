// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultAddr is the loopback address of /healthz and /readyz.
const DefaultAddr = "127.0.0.1:8082"

// Health collects the readiness of the agent's components. A component is
// not ready until it first reports success.
type Health struct {
	mu       sync.Mutex
	reasons  map[string]string
	draining bool
	// detail, when set, adds lines to /readyz?verbose.
	detail func() []string
}

// SetDetail adds detail lines (one per deployment) to /readyz?verbose.
func (h *Health) SetDetail(detail func() []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.detail = detail
}

// NewHealth tracks the named components, each not ready yet.
func NewHealth(components ...string) *Health {
	h := &Health{reasons: map[string]string{}}
	for _, c := range components {
		h.reasons[c] = "starting: no result yet"
	}
	return h
}

// Report records a component's latest outcome; nil err means ready.
func (h *Health) Report(component string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.reasons[component] = ""
		return
	}
	h.reasons[component] = err.Error()
}

// Drain marks the agent as shutting down: it is no longer ready.
func (h *Health) Drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.draining = true
}

// Ready reports readiness and, when not ready, one reason per problem in
// component order.
func (h *Health) Ready() (bool, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var reasons []string
	if h.draining {
		reasons = append(reasons, "agent: shutting down")
	}
	for c, r := range h.reasons {
		if r != "" {
			reasons = append(reasons, c+": "+r)
		}
	}
	slices.Sort(reasons)
	return len(reasons) == 0, reasons
}

// ServeHTTP serves /healthz (the process is serving) and /readyz (every
// component is ready, or 503 with the reasons).
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case "/healthz":
		fmt.Fprintln(w, "ok")
	case "/readyz":
		ok, reasons := h.Ready()
		var detail []string
		if r.URL.Query().Has("verbose") {
			h.mu.Lock()
			fn := h.detail
			h.mu.Unlock()
			if fn != nil {
				detail = fn()
			}
		}
		if ok {
			fmt.Fprintln(w, "ready")
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready:\n%s\n", strings.Join(reasons, "\n"))
		}
		for _, line := range detail {
			fmt.Fprintln(w, line)
		}
	default:
		http.NotFound(w, r)
	}
}

// Server serves a Health, and /metrics and further routes beside it, on
// a loopback address; it is one of the agent's serving components.
type Server struct {
	Addr   string
	Health *Health
	// Metrics, when set, serves /metrics beside the health endpoints.
	Metrics http.Handler
	// Routes are further loopback-only handlers by path.
	Routes map[string]http.Handler
	srv    *http.Server
	done   chan error
	bound  string
}

// Bound is the address the server listens on once started.
func (s *Server) Bound() string { return s.bound }

// CheckLoopback accepts only host:port with a loopback IP; what names the
// endpoint in the error ("health", "registry").
func CheckLoopback(what, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s address %q: %w: use 127.0.0.1:<port>", what, addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("%s address %q is not a loopback IP address: the %s endpoints serve only 127.0.0.1 or [::1]", what, addr, what)
	}
	return nil
}

func (s *Server) Name() string { return "health" }

func (s *Server) Start(ctx context.Context) error {
	if err := CheckLoopback("health", s.Addr); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("serve health endpoints on %s: %w: stop whatever uses the port or set PODMIN_AGENT_HEALTH_ADDR", s.Addr, err)
	}
	s.bound = ln.Addr().String()
	var h http.Handler = s.Health
	if s.Metrics != nil || len(s.Routes) > 0 {
		mux := http.NewServeMux()
		if s.Metrics != nil {
			mux.Handle("/metrics", s.Metrics)
		}
		for path, route := range s.Routes {
			mux.Handle(path, route)
		}
		mux.Handle("/", s.Health)
		h = mux
	}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	s.done = make(chan error, 1)
	go func() { s.done <- s.srv.Serve(ln) }()
	return nil
}

func (s *Server) Stop(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
