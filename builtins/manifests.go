// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/manifest"
)

// DefaultManifestFile is where init writes when --file is not given.
const DefaultManifestFile = "daemonset.yaml"

// ManifestOptions describe the built-in minimal DaemonSet; init and deploy
// share them. Field names follow the flags.
type ManifestOptions struct {
	Name      string
	NodeGroup string
	Namespace string
	Images    []string
	Service   bool
	Ports     []string
	CPU       string
	Memory    string
	Env       []string
	Secrets   []string
}

// InitOptions are the inputs of init.
type InitOptions struct {
	ManifestOptions
	// File is the output path; DefaultManifestFile when empty.
	File string
}

// InitResult reports what init wrote.
type InitResult struct {
	File      string `json:"file"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	NodeGroup string `json:"nodegroup"`
	Service   bool   `json:"service"`
}

// buildManifest renders the built-in DaemonSet with the current context's
// default secrets provider.
func (e *Env) buildManifest(o ManifestOptions) ([]byte, error) {
	if err := ids.ValidateNodeGroup(o.NodeGroup); err != nil {
		return nil, fmt.Errorf("--nodegroup: %w", err)
	}
	secretsProvider := ""
	if len(o.Secrets) > 0 {
		c, err := e.CurrentContext()
		if err != nil {
			return nil, err
		}
		secretsProvider = c.SecretsProvider
	}
	return manifest.Build(manifest.BuildOptions{
		Name: o.Name, NodeGroup: o.NodeGroup, Namespace: o.Namespace, Images: o.Images,
		Service: o.Service, Ports: o.Ports, CPU: o.CPU, Memory: o.Memory,
		Env: o.Env, LookupEnv: e.lookupEnv, Secrets: o.Secrets, SecretsProvider: secretsProvider,
	})
}

// Init writes a minimal valid DaemonSet (and Service) to a new file. It
// never overwrites: an existing file is an error and stays as it was.
func (e *Env) Init(opts InitOptions) (InitResult, error) {
	data, err := e.buildManifest(opts.ManifestOptions)
	if err != nil {
		return InitResult{}, err
	}
	res, err := manifest.Extract(data, manifest.ExtractOptions{Name: opts.Name, NodeGroup: opts.NodeGroup})
	if err != nil {
		return InitResult{}, fmt.Errorf("the built-in manifest does not validate (a Podmin bug): %w", err)
	}
	file := opts.File
	if file == "" {
		file = DefaultManifestFile
	}
	if err := e.writeNewFile(e.path(file), data); err != nil {
		return InitResult{}, err
	}
	return InitResult{File: file, Name: res.Name, Namespace: res.Namespace, NodeGroup: res.NodeGroup, Service: res.Service != nil}, nil
}

// writeNewFile creates path with data, failing if it exists.
func (e *Env) writeNewFile(path string, data []byte) error {
	err := e.files().CreateNew(path, data, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists: init never overwrites; remove it or pass --file with another path", path)
	}
	return err
}

// ValidateOptions are the inputs of validate.
type ValidateOptions struct {
	// File is the manifest to check; required ("-" reads standard input).
	File string
	// Images are --image overrides applied before validation.
	Images []string
	// Service asserts that the stream holds a Service.
	Service bool
}

// Extracted is a validated deployment: what deploy would commit.
type Extracted = manifest.Result

// Validate runs deploy's extraction and validation without writing.
func (e *Env) Validate(opts ValidateOptions) (*Extracted, error) {
	if opts.File == "" {
		return nil, errors.New("validate needs --file: pass the manifest to check (or - for standard input)")
	}
	data, err := e.readFile(opts.File)
	if err != nil {
		return nil, err
	}
	return manifest.Extract(data, manifest.ExtractOptions{Images: opts.Images, RequireService: opts.Service})
}

// readFile reads a user-supplied manifest, or standard input for "-".
func (e *Env) readFile(name string) ([]byte, error) {
	const limit = 4 << 20
	var r io.Reader
	if name == "-" {
		if e.Stdin == nil {
			return nil, errors.New("no standard input to read the manifest from: pass a file path")
		}
		r = e.Stdin
	} else {
		f, err := e.files().Open(e.path(name))
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", name, err)
	}
	if len(data) > limit {
		return nil, fmt.Errorf("manifest %s is larger than %d MiB: a DaemonSet and its Service are far smaller; check the file", name, limit>>20)
	}
	return data, nil
}
