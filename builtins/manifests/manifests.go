// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"podmin.dev/podmin/builtins/openv"
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
	// Force replaces an existing file that holds something else.
	Force bool
}

// Init actions.
const (
	InitCreated   = "created"
	InitUnchanged = "unchanged"
	InitReplaced  = "replaced"
)

// InitResult reports what init wrote.
type InitResult struct {
	File      string `json:"file"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	NodeGroup string `json:"nodegroup"`
	Service   bool   `json:"service"`
	// Action is InitCreated, InitUnchanged (the file already held exactly
	// this manifest, so nothing was written) or InitReplaced (Force).
	Action string `json:"action"`
	// Warnings are the manifest's privileged settings and host access.
	Warnings []openv.Warning `json:"warnings"`
}

// BuildManifest renders the built-in DaemonSet with the current context's
// default secrets provider, and returns it extracted as deploy and init
// would extract it (manifest.BuildExtracted: one extraction, not two).
func BuildManifest(e *openv.Env, o ManifestOptions) ([]byte, *manifest.Result, error) {
	if err := ids.ValidateNodeGroup(o.NodeGroup); err != nil {
		return nil, nil, fmt.Errorf("--nodegroup: %w", err)
	}
	secretsProvider := ""
	if len(o.Secrets) > 0 {
		c, err := e.CurrentContext()
		if err != nil {
			return nil, nil, err
		}
		secretsProvider = c.SecretsProvider
	}
	return manifest.BuildExtracted(manifest.BuildOptions{
		Name: o.Name, NodeGroup: o.NodeGroup, Namespace: o.Namespace, Images: o.Images,
		Service: o.Service, Ports: o.Ports, CPU: o.CPU, Memory: o.Memory,
		Env: o.Env, LookupEnv: e.Getenv, Secrets: o.Secrets, SecretsProvider: secretsProvider,
	})
}

// CheckInit applies the rules of init that need nothing but its options
// (and the environment, for --env KEY): the CLI reports them as bad usage
// before it reads a context or a file.
func CheckInit(e *openv.Env, opts InitOptions) error {
	return CheckManifestOptions(e, opts.ManifestOptions)
}

// CheckManifestOptions renders the built-in manifest without a context:
// the secrets provider only names the annotation, so any will do.
func CheckManifestOptions(e *openv.Env, o ManifestOptions) error {
	if err := ids.ValidateNodeGroup(o.NodeGroup); err != nil {
		return fmt.Errorf("--nodegroup: %w", err)
	}
	provider := ""
	if len(o.Secrets) > 0 {
		provider = manifest.SecretsProviders()[0]
	}
	_, err := manifest.Build(manifest.BuildOptions{
		Name: o.Name, NodeGroup: o.NodeGroup, Namespace: o.Namespace, Images: o.Images,
		Service: o.Service, Ports: o.Ports, CPU: o.CPU, Memory: o.Memory,
		Env: o.Env, LookupEnv: e.Getenv, Secrets: o.Secrets, SecretsProvider: provider,
	})
	return err
}

// Init writes a minimal valid DaemonSet (and Service) to a new file. It is
// idempotent: an existing file that already holds exactly this manifest is
// reported unchanged and not written. An existing file holding anything
// else is an error and stays as it was, unless Force replaces it.
func Init(e *openv.Env, opts InitOptions) (InitResult, error) {
	if err := CheckInit(e, opts); err != nil {
		return InitResult{}, openv.InvalidArgument(err)
	}
	data, res, err := BuildManifest(e, opts.ManifestOptions)
	if err != nil {
		return InitResult{}, err
	}
	file := opts.File
	if file == "" {
		file = DefaultManifestFile
	}
	out := InitResult{File: file, Name: res.Name, Namespace: res.Namespace, NodeGroup: res.NodeGroup, Service: res.Service != nil,
		Warnings: e.Warn(openv.ManifestWarnings(res.Warnings))}
	path := e.Path(file)
	existing, err := readExisting(e, path, len(data))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := writeNewFile(e, path, data); err != nil {
			return InitResult{}, err
		}
		out.Action = InitCreated
	case err != nil:
		return InitResult{}, err
	case bytes.Equal(existing, data):
		out.Action = InitUnchanged
	case !opts.Force:
		return InitResult{}, fmt.Errorf("%s already exists and holds a different manifest: init left it as it is; compare it with \"podmin validate -f %s\", then remove it, pass --force to replace it, or pass --file with another path", path, file)
	default:
		if err := e.LocalFiles().WriteFile(path, data, 0o644); err != nil {
			return InitResult{}, fmt.Errorf("replace %s: %w", path, err)
		}
		out.Action = InitReplaced
	}
	return out, nil
}

// readExisting reads the regular file at path, or reports fs.ErrNotExist.
// It reads at most one byte more than want: a longer file differs anyway.
func readExisting(e *openv.Env, path string, want int) ([]byte, error) {
	if e.Files == nil {
		fi, err := os.Lstat(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s already exists and is not a regular file: init left it as it is; remove it or pass --file with another path", path)
		}
	}
	f, err := e.LocalFiles().Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(want)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// writeNewFile creates path with data, failing if it exists. The content
// appears complete or not at all.
func writeNewFile(e *openv.Env, path string, data []byte) error {
	err := e.LocalFiles().CreateNew(path, data, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists: init left it as it is; pass --force to replace it or --file with another path", path)
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

// Validate runs deploy's extraction and validation without writing. The
// manifest's warnings are shown on the progress lines and returned in
// the result (ManifestWarnings converts them).
func Validate(e *openv.Env, opts ValidateOptions) (*Extracted, error) {
	if opts.File == "" {
		return nil, openv.InvalidArgument(errors.New("validate needs --file: pass the manifest to check (or - for standard input)"))
	}
	if err := manifest.CheckImageValues(opts.Images); err != nil {
		return nil, openv.InvalidArgument(err)
	}
	data, err := ReadFile(e, opts.File)
	if err != nil {
		return nil, err
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{Images: opts.Images, RequireService: opts.Service})
	if err != nil {
		return nil, err
	}
	e.Warn(openv.ManifestWarnings(ex.Warnings))
	return ex, nil
}

// ReadFile reads a user-supplied manifest, or standard input for "-".
func ReadFile(e *openv.Env, name string) ([]byte, error) {
	const limit = 4 << 20
	var r io.Reader
	if name == "-" {
		if e.Stdin == nil {
			return nil, errors.New("no standard input to read the manifest from: pass a file path")
		}
		r = e.Stdin
	} else {
		f, err := e.LocalFiles().Open(e.Path(name))
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
