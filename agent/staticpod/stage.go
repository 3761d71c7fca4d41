// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// stagedPod is one Pod of the candidate set.
type stagedPod struct {
	pod *nodepod.Pod
	// service is the Pod's Service, when its deployment has one.
	service *Service
	// values are freshly fetched values to install, nil when the values of
	// this revision are already on the tmpfs (or none are declared).
	values mounts.Values
	// failed reports that publishing it failed: it keeps its last valid
	// state, and so does its Service.
	failed bool
	// held, when set, says why the Gate kept the running revision: the
	// Pod keeps its file and values, and its Service stays as published.
	held string
	// surges says that the deployment's new revisions start beside the
	// running one (maxSurge).
	surges bool
	// target is the static Pod name the pass writes the Pod's file to
	// ("" for none), keep the names of the deployment's files it keeps
	// (plan, surge.go); retireWhy says why the deployment's second Pod
	// keeps running, planErr why the plan failed.
	target    string
	keep      []string
	retireWhy string
	planErr   error
	// valuesWritten says what publishing did to the values on the tmpfs.
	valuesWritten valuesOutcome
}

// valuesOutcome is what publishing a Pod did to its values.
type valuesOutcome int

const (
	// valuesUntouched: nothing was written (none fetched this pass).
	valuesUntouched valuesOutcome = iota
	// valuesFailed: writing began and did not complete.
	valuesFailed
	// valuesInstalled: this revision's complete set is on the tmpfs.
	valuesInstalled
)

// candidate is the complete staged desired state of the NodeGroup.
type candidate struct {
	pods []stagedPod
	// failures are the deployments that keep their last valid state this
	// pass (payload, transformation or value fetch failed).
	failures []PodFailure
	// payloads are the verified bytes of every payload read successfully.
	payloads map[string][]byte
	// transformed are the pristine transformations of this pass.
	transformed map[state.Key]transformed
}

// transformed is one deployment's Pod and Service as transformation
// produced them from its entry, before publishing annotates the Pod. An
// entry names its payloads by their SHA-512 and the bytes are verified
// against it, so the same entry always transforms to the same result: a
// pass reuses the last pass's instead of decoding every Pod again.
type transformed struct {
	entry   state.Entry
	pod     nodepod.Pod
	service *Service
	surges  bool
}

// staged returns a fresh staged Pod of t; publishing may change it.
func (t transformed) staged() stagedPod {
	pod := t.pod
	sp := stagedPod{pod: &pod, surges: t.surges}
	if t.service != nil {
		svc := *t.service
		sp.service = &svc
	}
	return sp
}

// fail records that the deployment's Pod keeps its last valid state: kind
// says what failed (state.ErrorPayload, ...), revision is the revision the
// pass tried to publish ("" when unknown).
func (c *candidate) fail(r *Reconciler, key state.Key, kind, revision string, err error) {
	r.log.Warn("Pod kept at its last valid state", "deployment", key.String(), "pod", key.Name, "kind", kind, "err", err)
	c.failures = append(c.failures, PodFailure{Deployment: key, Pod: key.Name, Kind: kind, Revision: revision, Err: err})
}

// stage fetches and verifies the referenced payloads, transforms every
// Pod and decodes every Service (reusing the last pass's result for an
// unchanged entry) and fetches the values of Pods whose revision
// has none on the tmpfs yet. A problem with one deployment (missing or
// corrupt payload, invalid content, failed value fetch) keeps only that
// deployment at its last valid state.
func (r *Reconciler) stage(ctx context.Context, items []state.Item) (*candidate, error) {
	c := &candidate{}
	var fetchErrs map[string]error
	c.payloads, fetchErrs = r.fetchPayloads(ctx, items)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.step(StepFetched, ""); err != nil {
		return nil, err
	}
	results := make([]transformed, len(items))
	errs := make([]error, len(items))
	parallel(len(items), func(i int) {
		it := items[i]
		if t, ok := r.transformed[it.Key]; ok && t.entry == it.Entry {
			results[i] = t
			return
		}
		results[i], errs[i] = transform(it, c.payloads, fetchErrs, r.incarnation(it.Key.Name, nodepod.Revision(it.Entry)))
	})
	c.transformed = make(map[state.Key]transformed, len(items))
	for i, it := range items {
		if errs[i] != nil {
			c.fail(r, it.Key, state.ErrorPayload, nodepod.Revision(it.Entry), errs[i])
			continue
		}
		c.transformed[it.Key] = results[i]
		sp := results[i].staged()
		p := sp.pod
		if len(p.Mounts) > 0 && r.loaded[p.Name] == p.Revision && !r.valuesInPlace(p) {
			// The record of loaded values vouches only for what is there.
			r.log.Warn("values of the Pod are missing on the node: fetching them again", "pod", p.Name)
			delete(r.loaded, p.Name)
		}
		if len(p.Mounts) > 0 && r.loaded[p.Name] != p.Revision {
			if pv, ok := r.pending[p.Name]; ok && pv.revision == p.Revision {
				// Fetched for this revision while its Pod waited for a
				// rollout slot: values are read once per revision.
				sp.values = pv.values
			} else {
				var err error
				if sp.values, err = mounts.Fetch(ctx, r.opts.Secrets, r.opts.Cluster, p); err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					c.fail(r, it.Key, state.ErrorSecret, p.Revision, err)
					continue
				}
			}
		}
		c.pods = append(c.pods, sp)
	}
	if err := r.step(StepStaged, ""); err != nil {
		return nil, err
	}
	return c, nil
}

// valuesInPlace reports whether every declared value of p is a file in
// its provider's host directory.
func (r *Reconciler) valuesInPlace(p *nodepod.Pod) bool {
	for _, m := range p.Mounts {
		for _, k := range m.Keys {
			fi, err := os.Stat(filepath.Join(r.opts.Root, filepath.FromSlash(m.HostDir), k))
			if err != nil || !fi.Mode().IsRegular() {
				return false
			}
		}
	}
	return true
}

// transform turns one deployment's verified payloads into its staged Pod
// and Service.
func transform(it state.Item, payloads map[string][]byte, fetchErrs map[string]error, incarnation string) (transformed, error) {
	if err := fetchErrs[it.Entry.Pod]; err != nil {
		return transformed{}, err
	}
	if err := fetchErrs[it.Entry.Service]; it.Entry.Service != "" && err != nil {
		return transformed{}, err
	}
	p, err := nodepod.TransformIncarnation(it.Key, it.Entry, payloads[it.Entry.Pod], incarnation)
	if err != nil {
		return transformed{}, err
	}
	strategy, err := manifest.PodStrategy(payloads[it.Entry.Pod])
	if err != nil {
		return transformed{}, fmt.Errorf("%w %s of deployment %s: %w: redeploy it with a current podmin", nodepod.ErrInvalidPayload, it.Entry.Pod, it.Key, err)
	}
	t := transformed{entry: it.Entry, pod: *p, surges: strategy.Surges()}
	if id, ok := it.Entry.ServiceID(); ok {
		spec, err := manifest.DecodeService(payloads[it.Entry.Service])
		if err == nil && (spec.Name != id.Name || spec.Namespace != id.Namespace) {
			err = fmt.Errorf("it defines %s/%s", spec.Namespace, spec.Name)
		}
		if err != nil {
			return transformed{}, fmt.Errorf("invalid Service payload %s of deployment %s: %w: redeploy it", it.Entry.Service, it.Key, err)
		}
		t.service = &Service{Deployment: it.Key, ID: id, Spec: spec, Pod: p.Name, Revision: p.Revision}
	}
	return t, nil
}

// parallel calls f for every index below n on one goroutine per CPU.
// Transforming and annotating Pods is CPU work: a thousand of them take
// about half as long on two cores.
func parallel(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// fetchPayloads returns the verified bytes of every payload items
// reference, reading only those not cached from earlier passes, and the
// error of each payload that could not be read or verified.
func (r *Reconciler) fetchPayloads(ctx context.Context, items []state.Item) (map[string][]byte, map[string]error) {
	out := make(map[string][]byte, 2*len(items))
	errs := map[string]error{}
	var missing []string
	for _, it := range items {
		for _, p := range []string{it.Entry.Pod, it.Entry.Service} {
			if _, seen := out[p]; p == "" || seen {
				continue
			}
			if data, ok := r.payloads[p]; ok {
				out[p] = data
				continue
			}
			out[p] = nil
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return out, errs
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next = make(chan string)
	)
	for range min(r.opts.FetchConcurrency, len(missing)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				data, err := fetchPayload(ctx, r.opts.Store, p)
				mu.Lock()
				if err != nil {
					errs[p] = err
					delete(out, p)
				} else {
					out[p] = data
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, p := range missing {
		select {
		case next <- p:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return out, errs
}

// keepPayloads caches the verified payloads of the last pass: they are
// immutable, so a later pass (or a retry of a failed Pod) reuses them.
func (r *Reconciler) keepPayloads(c *candidate) {
	keep := make(map[string][]byte, len(c.payloads))
	for p, data := range c.payloads {
		if data != nil {
			keep[p] = data
		}
	}
	r.payloads = keep
}
