// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"

	"podmin.dev/podmin/builtins"
)

// errNetworkDenied marks a request a recipe test may not make.
var errNetworkDenied = errors.New("network access is disabled in podmin test")

// netGuard is a test's only way out: it refuses every request except to
// the fakes the test started (t.fake_registry()), which it carries.
type netGuard struct {
	mu      sync.Mutex
	allowed map[string]bool // host:port of the test's fakes
}

func (g *netGuard) allow(hostport string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.allowed == nil {
		g.allowed = map[string]bool{}
	}
	g.allowed[hostport] = true
}

// RoundTrip implements http.RoundTripper.
func (g *netGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		port := "443"
		if req.URL.Scheme == "http" {
			port = "80"
		}
		host = net.JoinHostPort(host, port)
	}
	g.mu.Lock()
	ok := g.allowed[host]
	g.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s %s was refused: a test may reach only the fakes it starts; serve images with t.fake_registry()", errNetworkDenied, req.Method, req.URL.Redacted())
	}
	return http.DefaultTransport.RoundTrip(req)
}

// jailFiles keeps a test's file writes inside its sandbox: a path inside
// the sandbox is used as it is, any other absolute path is rebased below
// <sandbox>/root. Reads look in the sandbox first and then at the real
// path, so a test can read fixtures next to it but never change them.
type jailFiles struct {
	root string
	real builtins.OSFiles
}

// inside maps path into the sandbox.
func (j *jailFiles) inside(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		p = filepath.Clean(path)
	}
	if p == j.root || strings.HasPrefix(p, j.root+string(filepath.Separator)) {
		return p
	}
	return filepath.Join(j.root, "root", p)
}

// Open implements builtins.Files.
func (j *jailFiles) Open(path string) (io.ReadCloser, error) {
	f, err := j.real.Open(j.inside(path))
	if errors.Is(err, fs.ErrNotExist) {
		return j.real.Open(path)
	}
	return f, err
}

// CreateNew implements builtins.Files.
func (j *jailFiles) CreateNew(path string, data []byte, perm fs.FileMode) error {
	p := j.inside(path)
	if abs, _ := filepath.Abs(path); p != abs {
		// A rebased path's parents exist for real, not yet in the jail.
		if err := j.real.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	return j.real.CreateNew(p, data, perm)
}

// WriteFile implements builtins.Files.
func (j *jailFiles) WriteFile(path string, data []byte, perm fs.FileMode) error {
	return j.real.WriteFile(j.inside(path), data, perm)
}

// MkdirAll implements builtins.Files.
func (j *jailFiles) MkdirAll(path string, perm fs.FileMode) error {
	return j.real.MkdirAll(j.inside(path), perm)
}

// RemoveAll implements builtins.Files.
func (j *jailFiles) RemoveAll(path string) error {
	return j.real.RemoveAll(j.inside(path))
}
