// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestReadOnlyServesTheMounts: /read refuses every path outside the
// identity and secret mounts, also one that climbs out of them.
func TestReadOnlyServesTheMounts(t *testing.T) {
	srv := httptest.NewServer(newMux())
	defer srv.Close()
	for path, want := range map[string]int{
		"/etc/passwd":                             http.StatusForbidden,
		"/var/run/podmin/../../../etc/passwd":     http.StatusForbidden,
		"/var/run/secrets/podmin.dev/tls/../../x": http.StatusForbidden,
		"/var/run/podmin":                         http.StatusForbidden,
		"/var/run/podmin/local/absent":            http.StatusNotFound,
	} {
		resp, err := http.Get(srv.URL + "/read?path=" + url.QueryEscape(path))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestVersionAndFetch(t *testing.T) {
	t.Setenv("HELLO_VERSION", "v7")
	srv := httptest.NewServer(newMux())
	defer srv.Close()
	var h struct{ Version string }
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Version != "v7" {
		t.Fatalf("/ = %+v, %v", h, err)
	}
	resp.Body.Close()
	var f struct {
		Status int
		Body   string
	}
	resp, err = http.Get(srv.URL + "/fetch?url=" + url.QueryEscape(srv.URL+"/healthz"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil || f.Status != http.StatusOK || f.Body != "ok\n" {
		t.Fatalf("/fetch = %+v, %v", f, err)
	}
}

// On SIGTERM the server stops accepting connections at once but lets a
// request in flight finish and answer, then returns; one still in flight
// after the drain limit ends it with an error.
func TestSIGTERMFinishesRequestsInFlight(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	mux := newMux()
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "finished\n")
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	ctx, sigterm := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, mux, lis, nil, 10*time.Second) }()

	type answer struct {
		body string
		err  error
	}
	inFlight := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			inFlight <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		inFlight <- answer{string(b), err}
	}()
	<-started
	sigterm()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break // no longer accepting
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 10 s after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("the server returned (%v) while a request was in flight", err)
	default:
	}
	close(release)
	if a := <-inFlight; a.err != nil || a.body != "finished\n" {
		t.Fatalf("the request in flight at SIGTERM: %q, %v; want it finished", a.body, a.err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve after the drain: %v", err)
	}

	// A request that never finishes is cut at the drain limit.
	stuck := make(chan struct{})
	defer close(stuck)
	mux2 := http.NewServeMux()
	began := make(chan struct{})
	mux2.HandleFunc("GET /", func(http.ResponseWriter, *http.Request) { close(began); <-stuck })
	lis2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx2, sigterm2 := context.WithCancel(context.Background())
	go func() { served <- serve(ctx2, mux2, lis2, nil, 50*time.Millisecond) }()
	go func() {
		if resp, err := http.Get("http://" + lis2.Addr().String() + "/"); err == nil {
			resp.Body.Close()
		}
	}()
	<-began
	sigterm2()
	if err := <-served; err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("a request stuck past the drain limit: serve returned %v, want an error naming it", err)
	}
}
