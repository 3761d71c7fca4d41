// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// DeployOptions are the inputs of deploy. Without File the built-in minimal
// DaemonSet is used, shaped by the manifests.ManifestOptions; with File only Images
// and Service apply.
type DeployOptions struct {
	manifests.ManifestOptions
	// File is an explicit manifest ("-" reads standard input).
	File string
	// Wait, when set (UntilApplied or UntilReady), waits after the commit
	// until every expected node runs the committed revision (and reports
	// it ready); the wait ends with the context (--timeout).
	Wait string
	// Strict makes every warning of the deploy checks (a NodeGroup, an
	// image or a secret the deployment cannot run without, or a check
	// that could not tell) an error wrapping ErrDeployChecks, before
	// anything is written.
	Strict bool
}

// DeployResult reports a committed deployment.
type DeployResult struct {
	Name      string `json:"name"`
	NodeGroup string `json:"nodegroup"`
	Namespace string `json:"namespace"`
	// Service is the Service's name, empty without one.
	Service string `json:"service,omitempty"`
	// Action is created, updated, unchanged or repaired (the entry was
	// already committed, but a payload it names was missing or corrupt in
	// the bucket and was rewritten).
	Action string `json:"action"`
	// Pod and ServicePath are the committed content-addressed payloads.
	Pod         string `json:"pod"`
	ServicePath string `json:"servicePath,omitempty"`
	// ReplacedNamespace is set when this deploy replaced a same-named
	// DaemonSet of another namespace in the same NodeGroup.
	ReplacedNamespace string `json:"replacedNamespace,omitempty"`
	// Repaired lists payload objects whose bytes did not match the digest
	// in their name and that deploy replaced with the right bytes.
	Repaired []string `json:"repaired,omitempty"`
	// Bucket is where the index was committed.
	Bucket string `json:"bucket"`
	// Revision is the committed podmin.dev/revision.
	Revision string `json:"revision"`
	// Wait is the deployment's status when a wait ended, nil without one.
	Wait *WaitResult `json:"wait"`
	// Warnings are the manifest's privileged settings and host access,
	// then what the deploy checks found would keep the deployment from
	// running; the deployment was committed anyway (without Strict).
	Warnings []openv.Warning `json:"warnings"`
}

// deployManifest returns the manifest bytes and the image overrides that
// Extract must still apply.
func deployManifest(e *openv.Env, opts DeployOptions) (*manifest.Result, error) {
	if opts.File == "" {
		if len(opts.Images) == 0 {
			return nil, errDeployNeedsImage
		}
		// The built-in manifest comes extracted with deploy's own
		// options: its name and NodeGroup, no overrides, no assertion.
		_, ex, err := manifests.BuildManifest(e, opts.ManifestOptions)
		return ex, err
	}
	if err := builtInOnly(opts.ManifestOptions); err != nil {
		return nil, err
	}
	data, err := manifests.ReadFile(e, opts.File)
	if err != nil {
		return nil, err
	}
	return manifest.Extract(data, manifest.ExtractOptions{
		Name: opts.Name, NodeGroup: opts.NodeGroup, Images: opts.Images, RequireService: opts.Service,
	})
}

var errDeployNeedsImage = errors.New("deploy needs --image for the built-in manifest, or --file with a manifest")

// builtInOnly refuses the options that shape the built-in manifest when a
// manifest file is deployed.
func builtInOnly(o manifests.ManifestOptions) error {
	for _, f := range []struct {
		flag string
		set  bool
	}{
		{"--namespace", o.Namespace != ""}, {"--port", len(o.Ports) > 0}, {"--cpu", o.CPU != ""},
		{"--memory", o.Memory != ""}, {"--env", len(o.Env) > 0}, {"--secret", len(o.Secrets) > 0},
	} {
		if f.set {
			return fmt.Errorf("%s shapes the built-in manifest and cannot be combined with --file: put it in the manifest instead", f.flag)
		}
	}
	return nil
}

// CheckDeploy applies the rules of deploy that need nothing but its
// options (and the environment, for --env KEY): the CLI reports them as
// bad usage before it reads a context, a file or the bucket.
func CheckDeploy(e *openv.Env, opts DeployOptions) error {
	if _, err := state.NewKey(opts.NodeGroup, opts.Name); err != nil {
		return err
	}
	if opts.File != "" {
		if err := builtInOnly(opts.ManifestOptions); err != nil {
			return err
		}
		return manifest.CheckImageValues(opts.Images)
	}
	if len(opts.Images) == 0 {
		return errDeployNeedsImage
	}
	return manifests.CheckManifestOptions(e, opts.ManifestOptions)
}

// Deploy validates the deployment exactly as validate does and commits it to
// the cluster's deployment index. Success means the desired state was
// committed; nodes reconcile it asynchronously. A missing index in a bucket
// that holds desired state is refused before anything is written, with an
// error wrapping state.ErrIndexMissing: "podmin index rebuild" restores it.
func Deploy(ctx context.Context, e *openv.Env, opts DeployOptions) (DeployResult, error) {
	if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
		return DeployResult{}, openv.InvalidArgument(fmt.Errorf("--nodegroup: %w", err))
	}
	if err := CheckDeploy(e, opts); err != nil {
		return DeployResult{}, openv.InvalidArgument(err)
	}
	key, err := state.NewKey(opts.NodeGroup, opts.Name)
	if err != nil {
		return DeployResult{}, openv.InvalidArgument(err)
	}
	wopts := WaitOptions{Name: opts.Name, NodeGroup: opts.NodeGroup, Until: opts.Wait}
	if opts.Wait != "" {
		if err := checkWait(&wopts); err != nil {
			return DeployResult{}, openv.InvalidArgument(err)
		}
	}
	ex, err := deployManifest(e, opts)
	if err != nil {
		return DeployResult{}, err
	}
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return DeployResult{}, err
	}
	checks := deployChecks(ctx, e, c, store, ex)
	if opts.Strict && len(checks) > 0 {
		msgs := make([]string, len(checks))
		for i, w := range checks {
			msgs[i] = w.Message
		}
		return DeployResult{}, fmt.Errorf("%w: strict deploy refused %s: nothing was written: %d checks failed: %s", ErrDeployChecks, key, len(checks), strings.Join(msgs, "; "))
	}
	// Shown before the commit and any wait, which may take minutes.
	warnings := e.Warn(append(openv.ManifestWarnings(ex.Warnings), checks...))
	d := state.Deployment{Key: key, Namespace: ex.Namespace, Pod: ex.PodYAML}
	if ex.Service != nil {
		d.ServiceName, d.Service = ex.Service.Name, ex.ServiceYAML
	}
	r, err := state.NewCommitter(store, e.ClusterCommitOptions(c)).Deploy(ctx, d)
	if err != nil {
		return DeployResult{}, e.Explain(c, err)
	}
	// Said once the outcome is known: an unchanged deploy commits nothing.
	if r.Outcome != state.Unchanged {
		e.Progressf("committed %s to bucket %s (%s)", key, c.Bucket, r.Outcome)
	}
	if r.LostReply {
		e.Progressf("the reply to the index write was lost, but the index already holds %s as deployed: nothing more was written", key)
	}
	res := DeployResult{
		Name: ex.Name, NodeGroup: ex.NodeGroup, Namespace: ex.Namespace, Service: d.ServiceName,
		Action: string(r.Outcome), Pod: r.Entry.Pod, ServicePath: r.Entry.Service, Bucket: c.Bucket,
		Repaired: r.Repaired, Warnings: warnings,
	}
	if r.Replaced != nil {
		res.ReplacedNamespace = r.Replaced.Namespace
	}
	res.Revision = nodepod.Revision(r.Entry)
	if opts.Wait != "" {
		// The commit stands whatever the wait finds: the error says so.
		wopts.Revision = res.Revision
		wopts.newRevision = r.Outcome == state.Created || r.Outcome == state.Updated
		w, err := wait(ctx, e, store, wopts)
		res.Wait = &w
		if err != nil {
			return res, fmt.Errorf("%s %s (revision %s committed), but the wait failed: %w", key, res.Action, short(res.Revision), waitError(e, c, err))
		}
	}
	return res, nil
}

// DeleteOptions are the inputs of delete.
type DeleteOptions struct {
	Name      string
	NodeGroup string
}

// DeleteResult reports what delete did.
type DeleteResult struct {
	Name      string `json:"name"`
	NodeGroup string `json:"nodegroup"`
	// Action is deleted, or absent when there was no such deployment (and
	// nothing was written). A delete whose write lost its reply, after
	// which the index no longer holds the entry, is deleted.
	Action string `json:"action"`
}

// Delete removes a deployment's index entry. Its payloads stay: they are
// immutable and invisible once no entry references them. A missing index
// in a bucket that holds desired state is refused (state.ErrIndexMissing):
// whether the deployment exists is then unknown, not absent.
func Delete(ctx context.Context, e *openv.Env, opts DeleteOptions) (DeleteResult, error) {
	if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
		return DeleteResult{}, openv.InvalidArgument(fmt.Errorf("--nodegroup: %w", err))
	}
	key, err := state.NewKey(opts.NodeGroup, opts.Name)
	if err != nil {
		return DeleteResult{}, openv.InvalidArgument(err)
	}
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return DeleteResult{}, err
	}
	r, err := state.NewCommitter(store, e.ClusterCommitOptions(c)).Delete(ctx, key)
	if err != nil {
		return DeleteResult{}, e.Explain(c, err)
	}
	action := string(r.Outcome)
	if r.LostReply {
		// The entry was there when this delete wrote, and is gone now:
		// whether this write or another writer's removed it cannot be
		// proven, but the deployment is deleted either way.
		action = string(state.Deleted)
		e.Progressf("the reply to the index write was lost; reading the index back cannot prove whose write removed %s, but %s is no longer in the index: it is deleted, and nothing more was written", key, key)
	}
	return DeleteResult{Name: key.Name, NodeGroup: key.NodeGroup, Action: action}, nil
}

// OriginAnnotation marks a Pod that a Podmin install command created; list
// reports the origins it recognises.
const OriginAnnotation = "podmin.dev/origin"

// knownOrigins are the built-in install commands.
var knownOrigins = map[string]bool{"cloudflared": true}

// ListEntry is one committed deployment.
type ListEntry struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	NodeGroup string `json:"nodegroup"`
	// Service is "<namespace>/<service>" when the deployment has one.
	Service string `json:"service,omitempty"`
	// Origin is the built-in install command that created it, if any.
	Origin string `json:"origin,omitempty"`
	Pod    string `json:"pod"`
	// Error is set when a payload of the deployment is missing from the
	// bucket, or could not be read or verified.
	Error string `json:"error,omitempty"`
}

// listConcurrency bounds concurrent payload reads.
const listConcurrency = 16

// List reads the deployment index and its payloads: an inventory of
// committed desired state, never runtime status. A missing index lists
// nothing only in a new cluster; in a bucket that holds desired state it
// is an error wrapping state.ErrIndexMissing. Rows are sorted by
// NodeGroup, then name. Payload presence and identity come from one
// paginated LIST of each NodeGroup's Pod payload prefix (and of the
// Service payload prefix): a payload whose listed ETag and size are those
// the cache recorded when it verified the bytes is served from the cache;
// any other is read and verified. A payload that is missing, or cannot be
// read or verified, is reported on its row, not hidden.
func List(ctx context.Context, e *openv.Env) ([]ListEntry, error) {
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return nil, err
	}
	ix, _, err := state.ReadDesiredIndex(ctx, store)
	if err != nil {
		return nil, e.Explain(c, err)
	}
	items := ix.Items()
	listing, err := state.ListPayloads(ctx, store, state.PayloadPrefixes(items))
	if err != nil {
		return nil, e.Explain(c, err)
	}
	pc := e.ClusterCache(c)
	out := make([]ListEntry, len(items))
	sem := make(chan struct{}, listConcurrency)
	var wg sync.WaitGroup
	for i, it := range items {
		out[i] = ListEntry{Name: it.Key.Name, NodeGroup: it.Key.NodeGroup, Pod: it.Entry.Pod}
		if id, ok := it.Entry.ServiceID(); ok {
			out[i].Service = id.String()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i].Error = ctx.Err().Error()
				return
			}
			defer func() { <-sem }()
			fillFromPod(ctx, store, pc, listing, &out[i])
			if it.Entry.Service != "" {
				if err := state.VerifyListed(ctx, store, pc, listing, it.Entry.Service); err != nil {
					out[i].Error = strings.TrimPrefix(out[i].Error+"; "+err.Error(), "; ")
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return out, e.Explain(c, err)
	}
	return out, nil
}

// fillFromPod reads an entry's verified Pod payload against the listing,
// for its namespace and origin.
func fillFromPod(ctx context.Context, store objstore.Store, pc state.PayloadCache, l *state.Listing, le *ListEntry) {
	data, err := state.ReadListed(ctx, store, pc, l, le.Pod)
	if err != nil {
		le.Error = err.Error()
		return
	}
	// Only the metadata is read: decoding the whole Pod spec cost more
	// than everything else a list of cached payloads does.
	var pod struct {
		metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(data, &pod); err != nil {
		le.Error = fmt.Sprintf("decode Pod payload %s: %v", le.Pod, err)
		return
	}
	le.Namespace = pod.Namespace
	if le.Namespace == "" {
		le.Namespace = manifest.DefaultNamespace
	}
	if o := pod.Annotations[OriginAnnotation]; knownOrigins[o] {
		le.Origin = o
	}
}
