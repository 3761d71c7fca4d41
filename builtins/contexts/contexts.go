// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package contexts

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/scrub"
)

// ClusterTag is the bucket tag that names the cluster which created a
// bucket. It is a label anyone can copy: only the nonce connect records in
// the context and in the bucket's contexts.BucketNonceTag proves that
// Podmin created the bucket; a tag of another cluster is refused.
const ClusterTag = "podmin:cluster"

// ErrForeignBucket reports a bucket tagged for a different cluster.
var ErrForeignBucket = errors.New("bucket belongs to another cluster")

// ErrWouldReplace reports a connect that would give a saved context
// another bucket or provider without ConnectOptions.Replace: a typo in a
// bucket name must never silently repoint a cluster's context.
var ErrWouldReplace = errors.New("connect would replace the context's bucket")

// ConnectOptions are the inputs of connect; field names follow the flags.
type ConnectOptions struct {
	Cluster         string
	Provider        string
	Bucket          string
	Region          string
	Profile         string
	SecretsProvider string
	// Replace allows connecting a saved context to another bucket or
	// provider; without it that is refused with ErrWouldReplace.
	Replace bool
}

// ConnectResult reports what connect did.
type ConnectResult struct {
	Context contexts.Context `json:"context"`
	// BucketCreated is true when this connect created the bucket.
	BucketCreated bool `json:"bucketCreated"`
	// BucketOwned is true when the context holds the proof that Podmin
	// created the bucket for this cluster (the nonce in its tags), so a
	// later destroy may delete it. An existing bucket is never owned,
	// whatever its tags say.
	BucketOwned bool `json:"bucketOwned"`
	// Replaced is true when a saved context of the same name was replaced.
	Replaced bool `json:"replaced"`
	// Previous is the saved context this connect replaced because it
	// named another bucket or provider (Replace); nil otherwise.
	Previous *contexts.Context `json:"previous"`
}

// validateConnect checks every input that needs no network, so bad input
// fails before anything is created.
func validateConnect(e *openv.Env, opts *ConnectOptions) (cloud.Provider, error) {
	if err := ids.ValidateCluster(opts.Cluster); err != nil {
		return nil, openv.InvalidArgument(err)
	}
	p, err := e.Provider(opts.Provider)
	if err != nil {
		return nil, openv.InvalidArgument(err)
	}
	if opts.SecretsProvider != "" && !slices.Contains(manifest.SecretsProviders(), opts.SecretsProvider) {
		return nil, openv.InvalidArgument(fmt.Errorf("unknown secrets provider %s: use one of %q", scrub.Quote(opts.SecretsProvider), manifest.SecretsProviders()))
	}
	if opts.Bucket == "" {
		return nil, errors.New("no bucket given: pass --bucket with the name of the cluster's object storage bucket (it is created when absent)")
	}
	if err := p.ValidateBucketName(opts.Bucket); err != nil {
		return nil, err
	}
	allowed := p.SecretsProviders()
	if opts.SecretsProvider == "" {
		opts.SecretsProvider = allowed[0]
	} else if !slices.Contains(allowed, opts.SecretsProvider) {
		return nil, fmt.Errorf("secrets provider %s cannot be used with provider %q: use one of %q", scrub.Quote(opts.SecretsProvider), p.Name(), allowed)
	}
	return p, nil
}

// Connect verifies (creating when absent) the cluster bucket, then saves the
// context and selects it. Nothing is saved unless every check passed.
func Connect(ctx context.Context, e *openv.Env, opts ConnectOptions) (ConnectResult, error) {
	p, err := validateConnect(e, &opts)
	if err != nil {
		return ConnectResult{}, err
	}
	// Fail on an unwritable config directory before touching the bucket.
	if err := e.SavedContexts().Update(func(*contexts.File) error { return errDryRun }); err != nil && !errors.Is(err, errDryRun) {
		return ConnectResult{}, err
	}
	existing, err := e.SavedContexts().Load()
	if err != nil {
		return ConnectResult{}, err
	}
	// A context keeps the proof of every bucket it created: connecting
	// back to one proves it Podmin's again while the bucket carries it.
	var created []contexts.CreatedBucket
	var previous *contexts.Context
	prev, hadPrev := existing.Contexts[opts.Cluster]
	if hadPrev {
		created = prev.Created()
		if prev.Provider != opts.Provider || prev.Bucket != opts.Bucket {
			if !opts.Replace {
				return ConnectResult{}, fmt.Errorf("%w: context %s already connects bucket %s (provider %s, region %s): connecting it to bucket %s (provider %s) would replace that: nothing was created or saved; check the bucket's name, pass --replace (replace = True in a recipe) to replace it (the context keeps the proof of every bucket it created), or connect under another cluster name",
					ErrWouldReplace, opts.Cluster, prev.Bucket, prev.Provider, prev.Region, opts.Bucket, opts.Provider)
			}
			previous = &prev
		}
	}
	proof := contexts.CreatedNonce(created, opts.Provider, opts.Bucket)
	for _, name := range existing.Names() {
		c := existing.Contexts[name]
		if name != opts.Cluster && c.Provider == opts.Provider && c.Bucket == opts.Bucket {
			return ConnectResult{}, fmt.Errorf("bucket %q is already the bucket of context %q: one bucket holds one cluster; pass another --bucket or run \"podmin disconnect %s\" first", opts.Bucket, name, name)
		}
	}
	region, err := p.ResolveRegion(ctx, opts.Region, opts.Profile)
	if err != nil {
		return ConnectResult{}, err
	}
	b, err := p.OpenBucket(ctx, cloud.BucketRef{Bucket: opts.Bucket, Region: region, Profile: opts.Profile})
	if err != nil {
		return ConnectResult{}, err
	}
	res := ConnectResult{Context: contexts.Context{
		Cluster: opts.Cluster, Provider: p.Name(), Region: region, Bucket: opts.Bucket,
		Profile: opts.Profile, SecretsProvider: opts.SecretsProvider,
	}}
	if hadPrev && prev.Provider == p.Name() {
		// The CA secrets are the cluster's, whatever its bucket: keep the
		// proof of the ones this context created.
		res.Context.CANonce = prev.CANonce
	}
	if res.BucketCreated, res.Context.BucketNonce, err = ensureBucket(ctx, e, b, opts.Cluster, opts.Bucket, region, proof); err != nil {
		return ConnectResult{}, err
	}
	res.BucketOwned = res.Context.BucketNonce != ""
	// A bucket that no longer carries its nonce is another bucket of the
	// same name now: its proof proves nothing and is forgotten.
	created = contexts.WithoutCreated(created, p.Name(), opts.Bucket)
	if res.BucketOwned {
		created = contexts.WithCreated(created, contexts.CreatedBucket{Provider: p.Name(), Region: region, Bucket: opts.Bucket, Nonce: res.Context.BucketNonce})
	}
	if len(created) > 0 {
		res.Context.CreatedBuckets = created
	}
	res.Previous = previous
	if err := probeBucket(ctx, b, opts.Bucket); err != nil {
		return ConnectResult{}, err
	}
	err = e.SavedContexts().Update(func(f *contexts.File) error {
		var cur contexts.Context
		cur, res.Replaced = f.Contexts[opts.Cluster]
		if res.Replaced != hadPrev || cur.Provider != prev.Provider || cur.Bucket != prev.Bucket {
			return fmt.Errorf("context %s changed while connect ran (another podmin process saved it): nothing was saved; run connect again", opts.Cluster)
		}
		f.Contexts[opts.Cluster] = res.Context
		f.Current = opts.Cluster
		return nil
	})
	if err != nil {
		return ConnectResult{}, err
	}
	if e.Selection.Name != "" {
		// This Env selected another context (a recipe's run): connect
		// selects the one it connected for the operations that follow.
		e.Selection = contexts.Selection{Name: opts.Cluster, Source: contexts.SourceRecipe}
	}
	return res, nil
}

var errDryRun = errors.New("dry run")

// ensureBucket creates the bucket when absent and records a fresh nonce
// in its tags, or checks an existing bucket's tags and region. It returns
// the nonce that proves Podmin created the bucket for this context: the
// fresh one, or proof (what the saved context holds) when the bucket still
// carries it; empty for a bucket Podmin did not create.
func ensureBucket(ctx context.Context, e *openv.Env, b objstore.Bucket, cluster, name, region, proof string) (created bool, nonce string, err error) {
	exists, err := b.BucketExists(ctx)
	if err != nil {
		return false, "", fmt.Errorf("check bucket %q: %w", name, err)
	}
	if !exists {
		e.Progressf("creating bucket %s in %s", name, region)
		// Drawn before the create request, so only this request's bucket
		// can carry it.
		fresh := contexts.NewNonce()
		err := b.CreateBucket(ctx)
		switch {
		case err == nil:
			if err := b.SetBucketTags(ctx, map[string]string{ClusterTag: cluster, contexts.BucketNonceTag: fresh}); err != nil {
				return true, "", fmt.Errorf("bucket %q was created but could not be tagged: %w: nothing was saved; Podmin will use it but never delete it: run connect again, and delete the bucket yourself if it should go", name, err)
			}
			return true, fresh, nil
		case errors.Is(err, objstore.ErrBucketExists):
			// Someone else created it between our check and create: it is
			// not ours by name alone, so fall through to the ownership check.
		default:
			return false, "", fmt.Errorf("create bucket %q: %w", name, err)
		}
	}
	tags, err := b.BucketTags(ctx)
	if err != nil {
		return false, "", fmt.Errorf("read the tags of bucket %q: %w: Podmin will not use a bucket whose owner it cannot check", name, err)
	}
	if owner, ok := tags[ClusterTag]; ok && owner != cluster {
		return false, "", fmt.Errorf("%w: bucket %q is tagged %s=%s, not %s: connect as cluster %q or choose another bucket", ErrForeignBucket, name, ClusterTag, owner, cluster, owner)
	}
	got, err := b.BucketRegion(ctx)
	if err != nil {
		return false, "", fmt.Errorf("read the region of bucket %q: %w", name, err)
	}
	if got != region {
		return false, "", fmt.Errorf("bucket %q is in region %s, not %s: pass --region %s", name, got, region, got)
	}
	if tags[ClusterTag] == cluster && contexts.ProvenBy(proof, tags[contexts.BucketNonceTag]) {
		return false, proof, nil
	}
	return false, "", nil
}

// probeKey is where connect's read/write/delete probe lives for a moment.
func probeKey(nonce string) string { return "probes/connect-" + nonce }

// probeBucket proves read, write and delete access with a create-only
// object that carries a fresh nonce, and removes it only by its ETag.
func probeBucket(ctx context.Context, b objstore.Store, name string) error {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("probe bucket %q: %w", name, err)
	}
	nonce := hex.EncodeToString(raw)
	key, body := probeKey(nonce), []byte("podmin connect probe "+nonce+"\n")
	etag, err := b.PutIfAbsent(ctx, key, body)
	if err != nil {
		return fmt.Errorf("bucket %q is not writable: %w: grant PutObject on it", name, err)
	}
	obj, err := b.Get(ctx, key, objstore.GetOptions{})
	if err != nil {
		return fmt.Errorf("bucket %q is not readable: %w: grant GetObject on it (the probe object %s remains)", name, err, key)
	}
	if !bytes.Equal(obj.Data, body) {
		return fmt.Errorf("bucket %q returned different bytes than were written to %s: check the storage service", name, key)
	}
	if err := b.Delete(ctx, key, etag); err != nil {
		return fmt.Errorf("bucket %q does not allow deletes: %w: grant DeleteObject on it (the probe object %s remains)", name, err, key)
	}
	return nil
}

// ContextEntry is one saved context in a listing.
type ContextEntry struct {
	contexts.Context
	// Current marks the machine-wide current context of the contexts file.
	Current bool `json:"current"`
	// InEffect marks the context this invocation uses: --context, else
	// PODMIN_CONTEXT, else the current one; SelectedBy says which of
	// them selected it ("--context", "PODMIN_CONTEXT", "current", "the
	// recipe"), empty on the other entries.
	InEffect   bool   `json:"inEffect"`
	SelectedBy string `json:"selectedBy"`
}

// ListContexts returns the saved contexts in name order.
func ListContexts(e *openv.Env) ([]ContextEntry, error) {
	f, err := e.SavedContexts().Load()
	if err != nil {
		return nil, err
	}
	eff := f.InEffect(e.Selection)
	out := make([]ContextEntry, 0, len(f.Contexts))
	for _, n := range f.Names() {
		entry := ContextEntry{Context: f.Contexts[n], Current: n == f.Current}
		if n == eff.Name {
			entry.InEffect, entry.SelectedBy = true, eff.Source
		}
		out = append(out, entry)
	}
	return out, nil
}

// UseOptions are the inputs of use.
type UseOptions struct {
	Cluster string
	// Persist makes Cluster the machine-wide current context (the
	// command always does). Without it only this Env (a recipe's run)
	// uses Cluster, and every other shell keeps its own.
	Persist bool
}

// Use selects a saved context: for the rest of e's life, and with Persist
// also as the contexts file's current context.
func Use(e *openv.Env, opts UseOptions) (contexts.Context, error) {
	var c contexts.Context
	if !opts.Persist {
		f, err := e.SavedContexts().Load()
		if err != nil {
			return c, err
		}
		if c, err = f.Lookup(opts.Cluster); err != nil {
			return c, err
		}
		e.Selection = contexts.Selection{Name: opts.Cluster, Source: contexts.SourceRecipe}
		return c, nil
	}
	err := e.SavedContexts().Update(func(f *contexts.File) error {
		var err error
		if c, err = f.Lookup(opts.Cluster); err != nil {
			return err
		}
		f.Current = opts.Cluster
		return nil
	})
	if err == nil && e.Selection.Name != "" {
		// A selection of this Env would hide the one just persisted.
		e.Selection = contexts.Selection{Name: opts.Cluster, Source: contexts.SourceRecipe}
	}
	return c, err
}

// DisconnectOptions are the inputs of disconnect.
type DisconnectOptions struct {
	Cluster string
}

// DisconnectResult reports what disconnect removed.
type DisconnectResult struct {
	Context contexts.Context `json:"context"`
	// WasCurrent is true when the removed context was selected; no context
	// is selected afterwards.
	WasCurrent bool `json:"wasCurrent"`
}

// Disconnect forgets a context. It removes local state only: the context
// and the cluster's generated OpenTofu/Terraform module under
// <cache>/infrastructure/<cluster>. The bucket and everything in the cloud
// stay as they are, and setup regenerates the module from any machine.
func Disconnect(e *openv.Env, opts DisconnectOptions) (DisconnectResult, error) {
	var res DisconnectResult
	err := e.SavedContexts().Update(func(f *contexts.File) error {
		c, err := f.Lookup(opts.Cluster)
		if err != nil {
			return err
		}
		res = DisconnectResult{Context: c, WasCurrent: f.Current == opts.Cluster}
		delete(f.Contexts, opts.Cluster)
		if res.WasCurrent {
			f.Current = ""
		}
		return nil
	})
	if err != nil || e.Dirs.Cache == "" {
		return res, err
	}
	// The name was validated when the context was saved, so the path
	// stays below the cache.
	if ids.ValidateCluster(opts.Cluster) == nil {
		dir := infra.ModuleDir(e.Dirs.Cache, opts.Cluster)
		if err := e.LocalFiles().RemoveAll(dir); err != nil {
			return res, fmt.Errorf("context %s is removed, but its generated module %s could not be: %w: remove it yourself", opts.Cluster, dir, err)
		}
	}
	return res, nil
}
