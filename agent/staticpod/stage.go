// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"fmt"
	"sync"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// stagedPod is one Pod of the candidate set.
type stagedPod struct {
	pod *nodepod.Pod
	// values are freshly fetched values to install, nil when the values of
	// this revision are already on the tmpfs (or none are declared).
	values mounts.Values
}

// candidate is the complete staged desired state of the NodeGroup.
type candidate struct {
	pods     []stagedPod
	services []Service
	// retained names Pods whose value fetch failed: their last valid file
	// stays untouched, and failed says why.
	retained map[string]bool
	failed   []error
	// payloads are the verified bytes of every referenced payload.
	payloads map[string][]byte
}

// stage fetches and verifies the referenced payloads, transforms every
// Pod, decodes every Service and fetches the values of Pods whose revision
// has none on the tmpfs yet. Payload problems fail the whole pass; a value
// fetch failure retains only that Pod.
func (r *Reconciler) stage(ctx context.Context, items []state.Item) (*candidate, error) {
	c := &candidate{retained: map[string]bool{}}
	var err error
	if c.payloads, err = r.fetchPayloads(ctx, items); err != nil {
		return nil, err
	}
	if err := r.step(StepFetched, ""); err != nil {
		return nil, err
	}
	for _, it := range items {
		p, err := nodepod.Transform(it.Key, it.Entry, c.payloads[it.Entry.Pod])
		if err != nil {
			return nil, err
		}
		if id, ok := it.Entry.ServiceID(); ok {
			spec, err := manifest.DecodeService(c.payloads[it.Entry.Service])
			if err != nil {
				return nil, fmt.Errorf("invalid Service payload %s of deployment %s: %w: redeploy it", it.Entry.Service, it.Key, err)
			}
			if spec.Name != id.Name || spec.Namespace != id.Namespace {
				return nil, fmt.Errorf("invalid Service payload %s of deployment %s: it defines %s/%s: redeploy it", it.Entry.Service, it.Key, spec.Namespace, spec.Name)
			}
			c.services = append(c.services, Service{Deployment: it.Key, ID: id, Spec: spec, Pod: p.Name, Revision: p.Revision})
		}
		sp := stagedPod{pod: p}
		if len(p.Mounts) > 0 && r.loaded[p.Name] != p.Revision {
			sp.values, err = mounts.Fetch(ctx, r.opts.Secrets, r.opts.Cluster, p)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				r.log.Warn("value fetch failed: keeping the last valid Pod", "deployment", it.Key.String(), "err", err)
				c.retained[p.Name] = true
				c.failed = append(c.failed, err)
				continue
			}
		}
		c.pods = append(c.pods, sp)
	}
	if err := r.step(StepStaged, ""); err != nil {
		return nil, err
	}
	return c, nil
}

// fetchPayloads returns the verified bytes of every payload items
// reference, reading only those not cached from the last published pass.
func (r *Reconciler) fetchPayloads(ctx context.Context, items []state.Item) (map[string][]byte, error) {
	out := make(map[string][]byte, 2*len(items))
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
		return out, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan string)
	)
	for range min(r.opts.FetchConcurrency, len(missing)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				data, err := state.FetchPayload(ctx, r.opts.Store, p)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					cancel()
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
	if len(errs) > 0 {
		return nil, fmt.Errorf("keeping the published state: %w", errs[0])
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// keepPayloads caches exactly the payloads of the published candidate.
func (r *Reconciler) keepPayloads(c *candidate) {
	r.payloads = c.payloads
}
