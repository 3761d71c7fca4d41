// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Where Podmin mounts a Pod's identity and its secret values.
const (
	identityDir = "/var/run/secrets/podmin.dev/tls"
	secretsDir  = "/var/run/podmin"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "exit" {
		code, err := strconv.Atoi(os.Args[2])
		if err != nil {
			log.Fatalf("exit %q: want a status number", os.Args[2])
		}
		log.Printf("exiting with status %d, as the command asks", code)
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	plain, err := net.Listen("tcp", ":8080")
	if err != nil {
		log.Fatal(err)
	}
	secure, err := net.Listen("tcp", ":8443")
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("hello %s serving :8080 and :8443", os.Getenv("HELLO_VERSION"))
	if err := serve(ctx, newMux(), plain, secure, drainLimit); err != nil {
		log.Fatal(err)
	}
}

// drainLimit bounds how long requests in flight may take to finish after
// SIGTERM; kubelet's grace period (30 s by default) is longer.
const drainLimit = 10 * time.Second

// serve serves handler in plain HTTP on plain and, when secure is set,
// with the workload identity on secure until ctx ends, then shuts both
// servers down: no new connection is accepted, idle ones are closed and
// requests in flight get up to drain to finish.
func serve(ctx context.Context, handler http.Handler, plain, secure net.Listener, drain time.Duration) error {
	servers := []*http.Server{{Handler: handler, ReadHeaderTimeout: 5 * time.Second}}
	errc := make(chan error, 2)
	go func() { errc <- servers[0].Serve(plain) }()
	if secure != nil {
		s := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second,
			TLSConfig: &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: identity}}
		servers = append(servers, s)
		go func() { errc <- s.ServeTLS(secure, "", "") }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	log.Printf("SIGTERM: no new connections; letting the requests in flight finish (at most %s)", drain)
	began := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var errs []error
	done := make(chan error, len(servers))
	for _, s := range servers {
		go func() { done <- s.Shutdown(sctx) }()
	}
	for range servers {
		errs = append(errs, <-done)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("requests still in flight after %s: %w", drain, err)
	}
	log.Printf("drained in %s: exiting", time.Since(began).Round(time.Millisecond))
	return nil
}

// identity loads the mounted certificate on every handshake, so a renewed
// generation is served without a restart.
func identity(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(identityDir+"/tls.crt", identityDir+"/tls.key")
	if err != nil {
		return nil, fmt.Errorf("workload identity: %w", err)
	}
	return &c, nil
}

func newMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		host, _ := os.Hostname()
		kernel, _ := os.ReadFile("/proc/version")
		writeJSON(w, http.StatusOK, map[string]string{
			"version": os.Getenv("HELLO_VERSION"), "pod": host, "kernel": strings.TrimSpace(string(kernel)),
		})
	})
	mux.HandleFunc("GET /read", func(w http.ResponseWriter, r *http.Request) {
		p := path.Clean(r.URL.Query().Get("path"))
		if !strings.HasPrefix(p, identityDir+"/") && !strings.HasPrefix(p, secretsDir+"/") {
			http.Error(w, "only the identity and secret mounts are readable", http.StatusForbidden)
			return
		}
		b, err := os.ReadFile(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			http.Error(w, err.Error(), http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			_, _ = w.Write(b)
		}
	})
	mux.HandleFunc("GET /fetch", fetch)
	return mux
}

// fetch GETs a URL from inside the Pod: the Pod's resolver, its network
// and the workload CA it mounts.
func fetch(w http.ResponseWriter, r *http.Request) {
	roots := x509.NewCertPool()
	if pem, err := os.ReadFile(identityDir + "/ca.crt"); err == nil {
		roots.AppendCertsFromPEM(pem)
	}
	timeout := 2 * time.Second
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		timeout = d
	}
	// servername verifies the server as that name when the URL names an
	// address (a Service's VIP), so the VIP is reached without DNS.
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13, ServerName: r.URL.Query().Get("servername")},
		DisableKeepAlives: true,
	}}
	resp, err := client.Get(r.URL.Query().Get("url"))
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	writeJSON(w, http.StatusOK, map[string]any{"status": resp.StatusCode, "body": string(body)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
