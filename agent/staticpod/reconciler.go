// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// Step names a point of a reconcile pass, for Options.Step.
type Step string

// The points at which Options.Step is called.
const (
	// StepFetched follows reading and verifying every payload.
	StepFetched Step = "fetched"
	// StepStaged follows transforming the candidate set and fetching values.
	StepStaged Step = "staged"
	// StepConfirmed follows confirming the index ETag.
	StepConfirmed Step = "confirmed"
	// StepRename precedes renaming one synced temporary file into place.
	StepRename Step = "rename"
	// StepCleanup precedes removing one stale file.
	StepCleanup Step = "cleanup"
	// StepSync precedes the one sync of the static Pod directory that
	// makes a pass's renames and removals durable.
	StepSync Step = "sync"
	// StepPublish precedes publishing the Service desired state.
	StepPublish Step = "publish"
)

// Hooks let later subsystems observe reconciliation. Nil hooks are skipped.
type Hooks struct {
	// IndexChanged is called with the new ETag when a pass reads an index
	// other than the one last applied, before acting on it.
	IndexChanged func(etag string)
	// Published is called after a pass published the NodeGroup's state,
	// also when some Pods were kept at their last valid state.
	Published func(etag string, pods int)
	// Deployments receives the state of every deployment of the NodeGroup
	// after each pass that read the index (not after idle polls).
	Deployments func([]DeploymentState)
}

// Options configure a Reconciler.
type Options struct {
	// Store is the cluster bucket (read only).
	Store objstore.Store
	// Cluster and NodeGroup identify this node's desired state.
	Cluster, NodeGroup string
	// Root is the node root the node paths hang off ("/" in production).
	Root string
	// Secrets read declared values, by provider name.
	Secrets map[string]mounts.Reader
	// Publisher receives the Service desired state; nil records nothing.
	Publisher Publisher
	// Hooks observe passes.
	Hooks Hooks
	// Log receives progress; nil discards it.
	Log *slog.Logger
	// Step, when set, is called at each Step of a pass (file names the
	// file for StepRename and StepCleanup); an error ends the pass right
	// there, as a crash would. Tests inject faults with it.
	Step func(step Step, file string) error
	// FetchConcurrency bounds concurrent payload reads; 0 means 16.
	FetchConcurrency int
	// ViewWait bounds the wait for a stale NodeGroup view to catch up
	// with its index before the index is read instead; 0 means
	// DefaultViewWait, a negative value reads the index at once.
	ViewWait time.Duration
	// BucketExists, when set, is asked whenever the index is absent: an
	// absent bucket is ErrBucketMissing, also on a store that reports a
	// deleted bucket as a plain missing object.
	BucketExists func(ctx context.Context) (bool, error)
	// Identity, when set, gives every Pod its workload identity before its
	// file is written (the podmin.dev/identity-revision annotation) and
	// forgets the identities of Pods that left. Without it the reconciler
	// only creates the identity directory kubelet's hostPath needs.
	Identity Identity
	// Gate, when set, decides when a running Pod is replaced by a new
	// revision (rolling updates); nil replaces it at once.
	Gate Gate
	// Prepull, when set, fetches the images a pass adds to the node before
	// any file changes; PrepullTimeout bounds it (0 means
	// DefaultPrepullTimeout).
	Prepull        Prepuller
	PrepullTimeout time.Duration
	// Stopper, when set, lets a Pod replaced by a new revision stop
	// before its new file is written (see Stopper); StopTimeout and
	// StopSettle tune the wait (0 means DefaultStopTimeout and
	// DefaultStopSettle; a negative StopSettle means none).
	Stopper     Stopper
	StopTimeout time.Duration
	StopSettle  time.Duration
	// Now is the clock of StartupGrace; nil means time.Now.
	Now func() time.Time
}

// Identity is the workload identity the reconciler needs
// (*workload.Manager satisfies it).
type Identity interface {
	AnnotatePod(ctx context.Context, podYAML []byte) ([]byte, workload.Identity, error)
	Forget(keep []string) error
}

// Reconciler publishes one NodeGroup's desired state into the node's static
// Pod directory. Passes are serialized.
type Reconciler struct {
	opts        Options
	manifests   string
	log         *slog.Logger
	mu          sync.Mutex // serializes passes
	applied     bool       // the index version appliedFrom is fully published
	appliedFrom applied
	// appliedETag is appliedFrom.etag for Applied, which runs beside passes.
	appliedETag atomic.Pointer[string]
	// seenETag is the last index object this process read (empty before
	// the first): once one was seen, an absent index is ErrIndexMissing.
	seenETag string
	// forced makes the next pass re-read the index in full even when its
	// ETag is the applied one (identity changes, for milestone 2).
	forced bool
	// payloads caches verified payload bytes by content-addressed path.
	payloads map[string][]byte
	// transformed caches the last pass's transformations by deployment.
	transformed map[state.Key]transformed
	// loaded is the revision whose values are on the tmpfs, by Pod.
	loaded map[string]string
	// retry makes the next pass read the index in full: the last pass
	// kept some Pods at their last valid state.
	retry bool
	// published is the last published Service of each deployment.
	published map[state.Key]Service
	// unsynced reports renames or removals in the static Pod directory
	// that no directory sync has made durable yet. A new Reconciler
	// starts with it set: a process that died before its sync left
	// files whose bytes match, which no later rename would sync.
	unsynced bool
	// pending holds values fetched for Pods the Gate held back, by Pod;
	// heldLogged the last hold logged for each Pod.
	pending    map[string]pendingValues
	heldLogged map[string]string
	// deleted records the static Pods whose file a pass removed (a
	// deleted deployment's, or a retired second Pod's), by static Pod
	// name, with the revision it ran, so that a Pod of the same name
	// written soon after waits for the deleted one to stop (see Stopper);
	// an entry goes when it is used or the Stopper's timeout passed.
	deleted  map[string]deletedPod
	counters counters
	// started is when the Reconciler was made: StartupGrace counts from it.
	started time.Time
	fmu     sync.Mutex
	// states are the deployments after the last pass that read the index.
	smu    sync.Mutex
	states []DeploymentState
}

// deletedPod is a Pod whose file a pass removed: the revision it ran, and
// when.
type deletedPod struct {
	revision string
	at       time.Time
}

// New checks the options and returns a Reconciler that has published
// nothing yet: its first pass fetches every declared value (first load
// after boot).
func New(opts Options) (*Reconciler, error) {
	if opts.Store == nil {
		return nil, errors.New("staticpod: no object store: pass the cluster bucket")
	}
	if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
		return nil, fmt.Errorf("staticpod: %w", err)
	}
	if err := ids.ValidateCluster(opts.Cluster); err != nil {
		return nil, fmt.Errorf("staticpod: %w", err)
	}
	if opts.Root == "" {
		return nil, errors.New("staticpod: no node root: pass \"/\" or a sandbox directory")
	}
	if opts.FetchConcurrency <= 0 {
		opts.FetchConcurrency = 16
	}
	if opts.ViewWait == 0 {
		opts.ViewWait = DefaultViewWait
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Reconciler{
		started: opts.Now(),
		opts:    opts, log: log.With("nodegroup", opts.NodeGroup),
		manifests: filepath.Join(opts.Root, filepath.FromSlash(nodepod.ManifestsDir)),
		payloads:  map[string][]byte{}, loaded: map[string]string{}, published: map[state.Key]Service{},
		pending: map[string]pendingValues{}, heldLogged: map[string]string{}, deleted: map[string]deletedPod{},
		unsynced: true,
		counters: counters{pods: map[string]uint64{}, now: time.Now},
	}, nil
}

// ManifestsDir is the host directory the Reconciler owns.
func (r *Reconciler) ManifestsDir() string { return r.manifests }

// IdentityChanged makes the next pass reconcile fully (fenced by the index
// ETag like any other) even when the index is unchanged: the hook for a
// changed workload CA bundle or an expiring leaf.
func (r *Reconciler) IdentityChanged() {
	r.fmu.Lock()
	r.forced = true
	r.fmu.Unlock()
}

func (r *Reconciler) step(s Step, file string) error {
	if r.opts.Step == nil {
		return nil
	}
	if err := r.opts.Step(s, file); err != nil {
		return fmt.Errorf("%w at %s %s: %w", errStep, s, file, err)
	}
	return nil
}

// errStep marks an error of Options.Step: it ends the pass like a crash.
var errStep = errors.New("reconcile stopped")

// Result describes one pass.
type Result struct {
	// Unchanged reports an idle pass: the index was not modified.
	Unchanged bool
	// ETag is the index version the pass acted on.
	ETag string
	// Read says how the pass learned the NodeGroup's desired state:
	// ReadNone, ReadMetadata, ReadView or ReadIndex.
	Read string
	// Pods counts the NodeGroup's desired Pods; Written the files replaced
	// and Removed the stale files deleted.
	Pods, Written, Removed int
	// Failed lists the Pods kept at their last valid state.
	Failed []PodFailure
	// Held lists the Pods whose new revision the Gate held back: they keep
	// running their old one.
	Held []HeldPod
	// Retiring lists the deployments that run two Pods after the pass
	// (a maxSurge update): Revision is the committed one, Reason why the
	// other Pod has not stopped yet.
	Retiring []HeldPod
}

// PodFailure is one Pod that a pass could not publish: its last valid
// file (if any) and values stay in place, every other Pod proceeds.
type PodFailure struct {
	Deployment state.Key
	Pod        string
	// Kind says what failed: state.ErrorPayload, ErrorSecret,
	// ErrorIdentity or ErrorFile.
	Kind string
	// Revision is the revision the pass tried to publish ("" when the
	// failure is about no deployment's revision, like a stale file).
	Revision string
	Err      error
}

// PodsFailedError reports a pass that published the NodeGroup except for
// the listed Pods. It names every Pod, so /readyz says which ones.
type PodsFailedError struct {
	Failures []PodFailure
}

func (e *PodsFailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d Pod(s) kept at their last valid state", len(e.Failures))
	for _, f := range e.Failures {
		if f.Deployment.NodeGroup == "" {
			fmt.Fprintf(&b, "; pod %s: %v", f.Pod, f.Err)
			continue
		}
		fmt.Fprintf(&b, "; pod %s (deployment %s): %v", f.Pod, f.Deployment, f.Err)
	}
	return b.String()
}

// Unwrap returns the Pods' errors.
func (e *PodsFailedError) Unwrap() []error {
	out := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		out[i] = f.Err
	}
	return out
}

// Reconcile runs one pass. When the applied index is still current it
// costs one conditional read and changes nothing. On error the node keeps
// its previously published state (or, after a failure during publication,
// a mix of old and new complete files) and the next pass retries.
func (r *Reconciler) Reconcile(ctx context.Context) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fmu.Lock()
	forced := r.forced
	r.forced = false
	r.fmu.Unlock()
	res, err := r.passRestarting(ctx, forced)
	r.counters.passed(err)
	if err != nil && forced {
		r.IdentityChanged() // keep the request for the retry
	}
	return res, err
}

// setApplied records that the NodeGroup's published state is d's.
func (r *Reconciler) setApplied(d desired) {
	r.applied = true
	r.appliedFrom = applied{etag: d.etag, writeID: d.writeID, digest: d.digest, items: d.items}
	etag := d.etag
	r.appliedETag.Store(&etag)
}

// Applied returns the index ETag whose NodeGroup state is published, and
// whether any is: a hint naming it asks for nothing new.
func (r *Reconciler) Applied() (string, bool) {
	p := r.appliedETag.Load()
	if p == nil {
		return "", false
	}
	return *p, true
}

// ErrBucketMissing reports that the cluster bucket itself is absent: the
// node keeps everything it published and retries.
var ErrBucketMissing = errors.New("the cluster bucket does not exist")

// ErrIndexMissing reports that deployments/index.json is absent although
// this node has had a desired state: an index this process read, or static
// Pods an earlier run published. Nothing desired is an explicit empty
// index ({}), which podmin delete writes when it removes the last
// deployment; an index that vanishes is a bucket being deleted (S3 deletes
// in key order, deployments/ before nodegroups/) or damaged. The node keeps
// everything it published and retries.
var ErrIndexMissing = errors.New("the deployment index is absent")

// bucketMissing is the error for a read that found no bucket
// (objstore.ErrBucketNotFound).
func bucketMissing(err error) error {
	return fmt.Errorf("%w: keeping every published Pod and Service until it is back: %w", ErrBucketMissing, err)
}

// absentIndex decides what an absent index means. An absent bucket (also
// on a store that answers a read from a deleted bucket with a plain
// missing object) is ErrBucketMissing; an index absent after this node had
// a desired state is ErrIndexMissing; only a node that has never had one
// reads it as empty desired state (a new cluster).
func (r *Reconciler) absentIndex(ctx context.Context) error {
	if err := r.checkBucket(ctx); err != nil {
		return err
	}
	const keep = "keeping every published Pod and Service: a cluster with nothing desired has an explicit empty index ({}), " +
		"so this is a bucket being deleted or damaged; restore the index from the payloads the bucket still holds with " +
		"podmin index rebuild (it shows what it will write first; podmin deploy and podmin delete refuse until the index is back)"
	if r.seenETag != "" {
		return fmt.Errorf("%w: %s was read at ETag %s and has vanished: %s", ErrIndexMissing, state.IndexPath, r.seenETag, keep)
	}
	published, err := r.publishedFiles()
	if err != nil {
		return fmt.Errorf("%w and the node's own static Pods cannot be listed: %w: keeping the published state", ErrIndexMissing, err)
	}
	if len(published) > 0 {
		return fmt.Errorf("%w, but %d static Pod(s) published by an earlier run are in %s (%s): %s",
			ErrIndexMissing, len(published), r.manifests, strings.Join(published, ", "), keep)
	}
	return nil
}

// publishedFiles lists the static Pod files of the Podmin-owned directory
// (this node's NodeGroup is the only one that writes there).
func (r *Reconciler) publishedFiles() ([]string, error) {
	entries, err := os.ReadDir(r.manifests)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if name := e.Name(); e.Type().IsRegular() && strings.HasSuffix(name, ".yaml") && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	return out, nil
}

// checkBucket tells an index absent from an existing bucket from an absent
// bucket (an outage: nothing may be removed).
func (r *Reconciler) checkBucket(ctx context.Context) error {
	if r.opts.BucketExists == nil {
		return nil
	}
	ok, err := r.opts.BucketExists(ctx)
	if err != nil {
		return fmt.Errorf("read %s: the index is absent and the bucket could not be checked: %w: keeping every published Pod and Service", state.IndexPath, err)
	}
	if !ok {
		return fmt.Errorf("%w: keeping every published Pod and Service until it is back: check the bucket name and the node's access to it", ErrBucketMissing)
	}
	return nil
}

// ErrIndexChanged reports that the index changed while a pass staged its
// candidate set: nothing of it was published. It is not a failure: the
// pass restarts with the new index.
var ErrIndexChanged = errors.New("the deployment index changed during reconciliation")

// confirm re-reads the index conditionally: ErrNotModified (or a still
// missing index) means the staged set is still the committed one.
func (r *Reconciler) confirm(ctx context.Context, etag string) error {
	_, err := r.opts.Store.Get(ctx, state.IndexPath, objstore.GetOptions{IfNoneMatch: etag})
	switch {
	case errors.Is(err, objstore.ErrBucketNotFound):
		return bucketMissing(err)
	case etag == "" && errors.Is(err, objstore.ErrNotFound):
		return r.absentIndex(ctx)
	case errors.Is(err, objstore.ErrNotModified):
		return nil
	case err == nil && etag == "":
		return fmt.Errorf("%w: it was created: nothing was published; restarting with the new index", ErrIndexChanged)
	case err == nil, errors.Is(err, objstore.ErrNotFound):
		return fmt.Errorf("%w (was %s): nothing was published; restarting with the new index", ErrIndexChanged, etag)
	}
	return fmt.Errorf("confirm %s: %w", state.IndexPath, err)
}

// maxRestarts bounds how often one Reconcile restarts a pass because the
// index changed under it.
const maxRestarts = 8

// passRestarting runs passes until one is not superseded by a newer index,
// at most maxRestarts+1 times.
func (r *Reconciler) passRestarting(ctx context.Context, forced bool) (Result, error) {
	for i := 0; ; i++ {
		res, err := r.pass(ctx, forced)
		if !errors.Is(err, ErrIndexChanged) || i == maxRestarts || ctx.Err() != nil {
			return res, err
		}
		r.counters.add(&r.counters.restarts)
		r.log.Debug("index changed during the pass: restarting", "etag", res.ETag, "restart", i+1)
		forced = true
	}
}

func (r *Reconciler) pass(ctx context.Context, forced bool) (Result, error) {
	d, err := r.readDesired(ctx, forced || r.retry)
	if err != nil {
		return Result{}, err
	}
	r.counters.read(d.read)
	etag, items := d.etag, d.items
	if d.unchanged {
		// The NodeGroup's published state is this version's.
		r.setApplied(d)
		return Result{Unchanged: true, ETag: etag, Read: d.read}, nil
	}
	if (!r.applied || etag != r.appliedFrom.etag) && r.opts.Hooks.IndexChanged != nil {
		r.opts.Hooks.IndexChanged(etag)
	}
	log := r.log.With("etag", etag, "read", d.read)
	c, err := r.stage(ctx, items)
	if err != nil {
		return Result{ETag: etag}, err
	}
	r.prepull(ctx, c)
	if err := r.confirm(ctx, etag); err != nil {
		return Result{ETag: etag}, err
	}
	if err := r.step(StepConfirmed, ""); err != nil {
		return Result{ETag: etag}, err
	}
	res := Result{ETag: etag, Pods: len(items), Read: d.read}
	if err := r.publish(ctx, c, &res); err != nil {
		return res, err
	}
	if err := r.step(StepPublish, ""); err != nil {
		return res, err
	}
	services := r.servicesOf(c)
	if r.opts.Publisher != nil {
		if err := r.opts.Publisher.PublishServices(ctx, services); err != nil {
			return res, fmt.Errorf("publish the Service desired state: %w", err)
		}
	}
	r.published = map[state.Key]Service{}
	for _, s := range services {
		r.published[s.Deployment] = s
	}
	r.setApplied(d)
	r.keepPayloads(c)
	r.transformed = c.transformed
	res.Failed = c.failures
	// A held Pod is asked about again at the next poll (or a hint).
	r.retry = len(c.failures) > 0 || len(res.Held) > 0 || len(res.Retiring) > 0
	r.record(items, c)
	r.counters.podFailures(c.failures)
	if r.opts.Hooks.Published != nil {
		r.opts.Hooks.Published(etag, res.Pods)
	}
	if len(c.failures) > 0 {
		log.Warn("desired state published except for Pods kept at their last valid state", "pods", res.Pods, "written", res.Written,
			"removed", res.Removed, "services", len(services), "failed", len(c.failures))
		return res, &PodsFailedError{Failures: c.failures}
	}
	level := slog.LevelInfo
	if res.Written == 0 && res.Removed == 0 && len(res.Held)+len(res.Retiring) > 0 {
		level = slog.LevelDebug // a pass asking again for a rollout slot
	}
	log.Log(ctx, level, "desired state published", "pods", res.Pods, "written", res.Written, "removed", res.Removed, "services", len(services), "held", len(res.Held), "retiring", len(res.Retiring))
	return res, nil
}

// servicesOf is the Service desired state after a pass: the staged
// Services, and for each deployment kept at its last valid state the
// Service last published for it.
func (r *Reconciler) servicesOf(c *candidate) []Service {
	var out []Service
	for _, sp := range c.pods {
		switch {
		case sp.service == nil || sp.failed:
		case sp.held != "":
			// The running revision keeps serving under its Service.
			if s, ok := r.published[sp.service.Deployment]; ok {
				out = append(out, s)
			} else {
				out = append(out, *sp.service)
			}
		default:
			out = append(out, *sp.service)
		}
	}
	for _, f := range c.failures {
		if s, ok := r.published[f.Deployment]; ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Service) int { return strings.Compare(a.Deployment.String(), b.Deployment.String()) })
	return out
}

func (r *Reconciler) now() time.Time { return r.opts.Now() }
