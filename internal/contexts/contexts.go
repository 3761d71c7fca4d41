// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package contexts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/scrub"
)

// FileName is the name of the contexts file inside the config directory.
const FileName = "contexts.json"

// ErrNoContext reports that no context is selected.
var ErrNoContext = errors.New("no current context")

// ErrUnknown reports a context name that is not saved.
var ErrUnknown = errors.New("unknown context")

// Context is one saved cluster connection.
type Context struct {
	Cluster         string `json:"cluster"`
	Provider        string `json:"provider"`
	Region          string `json:"region"`
	Bucket          string `json:"bucket"`
	Profile         string `json:"profile,omitempty"`
	SecretsProvider string `json:"secretsProvider"`
	// BucketNonce is the nonce connect drew just before it created the
	// bucket and also wrote into the bucket's BucketNonceTag; empty when
	// the bucket existed already (it is used, never deleted). Only a
	// matching pair lets destroy delete the bucket.
	BucketNonce string `json:"bucketNonce,omitempty"`
	// CANonce is the nonce setup drew before it first created the
	// cluster's CA secrets and stored with each of them (the
	// secrets.CreateNonceTag); destroy deletes only CA secrets carrying it.
	CANonce string `json:"caNonce,omitempty"`
	// CreatedBuckets are the buckets connect created for this context,
	// the current one included, each with its nonce, sorted by provider
	// and bucket. Connecting the context to another bucket keeps them,
	// so connecting back to one (a bucket made by a typo, say) still
	// proves it Podmin's, and destroy can delete it.
	CreatedBuckets []CreatedBucket `json:"createdBuckets,omitempty"`
}

// CreatedBucket is a bucket connect created for a context, and the nonce
// it drew for it and wrote into the bucket's BucketNonceTag.
type CreatedBucket struct {
	Provider string `json:"provider"`
	Region   string `json:"region"`
	Bucket   string `json:"bucket"`
	Nonce    string `json:"nonce"`
}

// Created returns every bucket the context created, with the current
// bucket's nonce when a context saved by an earlier Podmin lists none.
func (c Context) Created() []CreatedBucket {
	out := append([]CreatedBucket(nil), c.CreatedBuckets...)
	if c.BucketNonce != "" {
		out = WithCreated(out, CreatedBucket{Provider: c.Provider, Region: c.Region, Bucket: c.Bucket, Nonce: c.BucketNonce})
	}
	return out
}

// WithCreated returns list with b recorded in place of any entry for the
// same provider and bucket, sorted by provider and bucket.
func WithCreated(list []CreatedBucket, b CreatedBucket) []CreatedBucket {
	out := WithoutCreated(list, b.Provider, b.Bucket)
	out = append(out, b)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Provider != out[j].Provider {
			return out[i].Provider < out[j].Provider
		}
		return out[i].Bucket < out[j].Bucket
	})
	return out
}

// WithoutCreated returns list without the entry for provider and bucket.
func WithoutCreated(list []CreatedBucket, provider, bucket string) []CreatedBucket {
	out := make([]CreatedBucket, 0, len(list)+1)
	for _, e := range list {
		if e.Provider != provider || e.Bucket != bucket {
			out = append(out, e)
		}
	}
	return out
}

// CreatedNonce is the nonce of the bucket of provider that list records
// as created, or "".
func CreatedNonce(list []CreatedBucket, provider, bucket string) string {
	for _, e := range list {
		if e.Provider == provider && e.Bucket == bucket {
			return e.Nonce
		}
	}
	return ""
}

// File is the whole contexts file.
type File struct {
	Current  string             `json:"current,omitempty"`
	Contexts map[string]Context `json:"contexts"`
}

// Names returns the saved context names in sorted order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Contexts))
	for n := range f.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CurrentContext returns the selected context or an error that says how to
// select one.
func (f *File) CurrentContext() (Context, error) {
	if f.Current == "" {
		return Context{}, fmt.Errorf("%w: run \"podmin connect CLUSTER --provider aws|local --bucket BUCKET\" to add one, or \"podmin use CLUSTER\" to select a saved one", ErrNoContext)
	}
	c, ok := f.Contexts[f.Current]
	if !ok {
		return Context{}, fmt.Errorf("%w: the current context %q is not saved: run \"podmin use CLUSTER\" to select another", ErrNoContext, f.Current)
	}
	return c, nil
}

// Lookup returns a saved context by name or an error listing the known ones.
func (f *File) Lookup(name string) (Context, error) {
	c, ok := f.Contexts[name]
	if !ok {
		known := f.Names()
		if len(known) == 0 {
			return Context{}, fmt.Errorf("%w %s: no contexts are saved: run \"podmin connect CLUSTER --provider aws|local --bucket BUCKET\"", ErrUnknown, scrub.Quote(name))
		}
		return Context{}, fmt.Errorf("%w %s: saved contexts are %q: run \"podmin use\" to list them or \"podmin connect\" to add one", ErrUnknown, scrub.Quote(name), known)
	}
	return c, nil
}

// Load reads the contexts file from the config directory. A missing file is
// an empty one.
func Load(configDir string) (*File, error) {
	p := filepath.Join(configDir, FileName)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{Contexts: map[string]Context{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read contexts file: %w: check the config directory (XDG_CONFIG_HOME)", err)
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("contexts file %s is corrupt: %w: fix or remove it and run \"podmin connect\" again", p, err)
	}
	if f.Contexts == nil {
		f.Contexts = map[string]Context{}
	}
	return &f, nil
}

// Update applies fn to the contexts file under an exclusive lock, so that
// concurrent podmin processes never lose each other's changes, and writes
// the result atomically with mode 0600. Nothing is written when fn fails.
func Update(configDir string, fn func(*File) error) error {
	if err := paths.EnsureDir(configDir); err != nil {
		return fmt.Errorf("config directory: %w", err)
	}
	unlock, err := lockDir(configDir)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := Load(configDir)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode contexts: %w", err)
	}
	return paths.WriteFileAtomic(filepath.Join(configDir, FileName), append(b, '\n'), 0o600)
}
