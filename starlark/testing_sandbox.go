// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/objstore"
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

// errOutsideSandbox is the error of a read outside a test's sandbox and
// its directory. It matches fs.ErrNotExist: to the operation the file is
// absent (init then writes its file into the sandbox).
type errOutsideSandbox struct{ testDir string }

func (e errOutsideSandbox) Error() string {
	if e.testDir == "" {
		return "outside the test's sandbox: podmin test reads only files of its sandbox, so this reads as absent"
	}
	return fmt.Sprintf("outside the test's directory %s and its sandbox: podmin test reads only files below them, so this reads as absent", e.testDir)
}

func (errOutsideSandbox) Is(target error) bool { return target == fs.ErrNotExist }

// errTilde is the error of a path that starts with "~": Podmin does not
// expand it, and a test must not look for the home directory.
var errTilde = fmt.Errorf("%w: Podmin does not expand ~ (the shell does), and podmin test reads no file of a home directory: use a path below the test's directory", fs.ErrNotExist)

// jailFiles keeps a test's file access inside its sandbox. Writes: a path
// inside the sandbox is used as it is, any other absolute path is rebased
// below <sandbox>/root. Reads: the sandbox (with what the test wrote at
// rebased paths), then the test's own directory, read-only, where a
// relative path also finds the fixtures next to the test; anything else
// reads as absent, with an error that says why.
type jailFiles struct {
	root    string // the sandbox directory
	work    string // the scratch directory relative paths resolve into
	testDir string // the test file's directory; "" for none
	// realRoot and realTestDir are root and testDir with symbolic links
	// resolved, for checking where a link leads.
	realRoot, realTestDir string
	real                  builtins.OSFiles
}

// newJailFiles returns the jail of the sandbox root for a test in testDir.
func newJailFiles(root, work, testDir string) *jailFiles {
	j := &jailFiles{root: root, work: work, testDir: testDir, realRoot: root, realTestDir: testDir}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		j.realRoot = r
	}
	if r, err := filepath.EvalSymlinks(testDir); err == nil && testDir != "" {
		j.realTestDir = r
	}
	return j
}

// inside maps path into the sandbox.
func (j *jailFiles) inside(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		p = filepath.Clean(path)
	}
	if within(p, j.root) {
		return p
	}
	return filepath.Join(j.root, "root", p)
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return dir != "" && (p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)))
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// ReadPath implements builtins.ReadJail: the path a read of path uses.
func (j *jailFiles) ReadPath(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var candidates []string
	switch {
	case within(p, j.work):
		rel, _ := filepath.Rel(j.work, p)
		if rel == "~" || strings.HasPrefix(rel, "~"+string(filepath.Separator)) {
			return "", &fs.PathError{Op: "open", Path: rel, Err: errTilde}
		}
		candidates = append(candidates, p)
		if j.testDir != "" {
			candidates = append(candidates, filepath.Join(j.testDir, rel))
		}
	case within(p, j.root):
		candidates = append(candidates, p)
	default:
		candidates = append(candidates, filepath.Join(j.root, "root", p))
		if within(p, j.testDir) {
			candidates = append(candidates, p)
		}
	}
	for _, c := range candidates {
		if !exists(c) {
			continue
		}
		// A symbolic link is followed only to somewhere readable.
		if real, err := filepath.EvalSymlinks(c); err != nil || !within(real, j.realRoot) && !within(real, j.realTestDir) {
			return "", &fs.PathError{Op: "open", Path: path, Err: errOutsideSandbox{testDir: j.testDir}}
		}
		return c, nil
	}
	if within(p, j.root) {
		return p, nil // absent from the sandbox: opening it says so
	}
	return "", &fs.PathError{Op: "open", Path: path, Err: errOutsideSandbox{testDir: j.testDir}}
}

// Open implements builtins.Files.
func (j *jailFiles) Open(path string) (io.ReadCloser, error) {
	p, err := j.ReadPath(path)
	if err != nil {
		return nil, err
	}
	return j.real.Open(p)
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

// jailProvider is the local provider of a test's sandbox: a bucket given
// by name lives in the sandbox's data directory already, and one given by
// absolute path is mapped into the sandbox as a write there would be, so
// a test never opens a bucket of the host.
type jailProvider struct {
	local.Provider
	jail *jailFiles
}

// Dir implements the local provider's Dir, mapped into the sandbox.
func (p jailProvider) Dir(bucket string) string { return p.jail.inside(p.Provider.Dir(bucket)) }

// OpenBucket implements cloud.Provider.
func (p jailProvider) OpenBucket(ctx context.Context, ref cloud.BucketRef) (objstore.Bucket, error) {
	if err := p.ValidateBucketName(ref.Bucket); err != nil {
		return nil, err
	}
	ref.Bucket = p.Dir(ref.Bucket)
	return p.Provider.OpenBucket(ctx, ref)
}

// RemoveAll implements builtins.Files.
func (j *jailFiles) RemoveAll(path string) error {
	return j.real.RemoveAll(j.inside(path))
}
