// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/objstore"
)

// Outcome says what a mutation did to its index entry.
type Outcome string

// Outcomes of Deploy and Delete.
const (
	// Created: the deployment had no entry and now has one.
	Created Outcome = "created"
	// Updated: the deployment's entry changed.
	Updated Outcome = "updated"
	// Unchanged: the entry already equalled the deployed one and its
	// payloads were present and intact; the index was not written.
	Unchanged Outcome = "unchanged"
	// Repaired: the entry already equalled the deployed one, but a payload
	// it names was missing from the bucket or held other bytes, and was
	// rewritten; the index was not written.
	Repaired Outcome = "repaired"
	// Deleted: the entry was removed.
	Deleted Outcome = "deleted"
	// Absent: there was no entry to delete; the index was not written.
	Absent Outcome = "absent"
)

// Deployment is one extracted DaemonSet ready to commit.
type Deployment struct {
	// Key is <nodegroup>/<DaemonSet name>.
	Key Key
	// Namespace is the DaemonSet's namespace. It must equal the Pod
	// payload's metadata.namespace and is the Service's namespace.
	Namespace string
	// Pod is the canonical Pod YAML; its SHA-512 names its object.
	Pod []byte
	// ServiceName is the optional Service's name; empty when there is none.
	ServiceName string
	// Service is the canonical Service YAML, set exactly when ServiceName is.
	Service []byte
}

// Replacement describes the entry a Deploy replaced when it belonged to a
// same-named DaemonSet in another namespace. Deployment identity ignores the
// namespace, so the caller must warn the user that the other one is gone.
// It is reported only when the other namespace is known; an old entry whose
// namespace cannot be read is not claimed to be a replacement.
type Replacement struct {
	// Namespace is the replaced DaemonSet's namespace.
	Namespace string
	// Entry is the replaced index entry.
	Entry Entry
}

// DeployResult is what a successful Deploy committed.
type DeployResult struct {
	// Key is the deployment.
	Key Key
	// Outcome is Created, Updated, Unchanged or Repaired.
	Outcome Outcome
	// Entry is the deployment's entry in the index after the commit.
	Entry Entry
	// Replaced is set when a DaemonSet of another namespace was replaced.
	Replaced *Replacement
	// Repaired lists payload paths whose object was missing although the
	// index named it, or held bytes that did not match the digest in its
	// name, and was rewritten with the right bytes.
	Repaired []string
	// LostReply is set when an index write of this call lost its reply and
	// could not be proven to have landed or not, but the index read
	// afterwards already held the entry (Outcome Unchanged or Repaired):
	// the desired state is committed, by this call or by another writer.
	LostReply bool
}

// Deploy stores the deployment's payloads and commits its index entry.
// Success means the index held the entry, and the bucket its payloads,
// when Deploy returned; nodes converge asynchronously. A Service identity
// owned by another deployment fails with ErrConflict, and nothing is
// written to the index then.
//
// The index is read first. An entry that already equals the target is
// Unchanged once its payloads are proven present and intact (one Head each
// with a warm cache); a missing or corrupt one is rewritten and the
// outcome is Repaired. Otherwise each payload is made present (created
// create-only, or proven by a Head) and then the index is written with
// compare-and-swap. The namespace of a replaced entry is resolved after
// the commit, from the payload cache when it holds the old Pod, so no
// request falls between the index read and its conditional write beyond
// the payload requests themselves.
func (c *Committer) Deploy(ctx context.Context, d Deployment) (DeployResult, error) {
	entry, err := d.entry()
	if err != nil {
		return DeployResult{}, err
	}
	payloads := []struct {
		path string
		data []byte
	}{{entry.Pod, d.Pod}}
	if entry.Service != "" {
		payloads = append(payloads, struct {
			path string
			data []byte
		}{entry.Service, d.Service})
	}
	res := DeployResult{Key: d.Key, Entry: entry}
	images := podImages(d.Pod)
	present := map[string]bool{} // payloads this call has written or verified
	ensure := func(ctx context.Context, referenced func(string) bool) error {
		for _, p := range payloads {
			if present[p.path] {
				continue
			}
			repaired, err := c.ensurePayload(ctx, p.path, p.data, referenced(p.path))
			if err != nil {
				return err
			}
			present[p.path] = true
			if repaired {
				res.Repaired = append(res.Repaired, p.path)
			}
		}
		return nil
	}
	var prev Entry
	r, err := c.commit(ctx, mutation{
		op:  "deploy",
		key: d.Key,
		holds: func(ix *Index) bool {
			old, ok := ix.Lookup(d.Key)
			return ok && old == entry
		},
		apply: func(ctx context.Context, ix *Index, id string) error {
			if err := ensure(ctx, ix.references); err != nil {
				return err
			}
			old, existed, err := ix.Set(d.Key, entry)
			if err != nil {
				return err
			}
			ix.record(d.Key, old, existed, Revision{Pod: entry.Pod, Service: entry.Service, Images: images,
				Time: c.opts.Now().UTC().Format(time.RFC3339), Write: id})
			res.Outcome, prev = Created, old
			if existed {
				res.Outcome = Updated
			}
			return nil
		},
	})
	if err != nil {
		return DeployResult{}, err
	}
	if r != wrote {
		// The index names these payloads already: prove them present and
		// intact, and rewrite one that is not.
		res.LostReply = r == heldAfterLostReply
		if err := ensure(ctx, func(string) bool { return true }); err != nil {
			return DeployResult{}, fmt.Errorf("deploy %q: the index already holds this deployment, but: %w", d.Key, err)
		}
		res.Outcome = Unchanged
		if len(res.Repaired) > 0 {
			res.Outcome = Repaired
		}
	}
	for _, p := range payloads {
		c.cachePayload(p.path, p.data)
	}
	if res.Outcome == Updated && prev.Pod != entry.Pod {
		// Same Pod bytes would mean the same namespace.
		if ns := c.namespaceOf(ctx, prev); ns != "" && ns != d.Namespace {
			res.Replaced = &Replacement{Namespace: ns, Entry: prev}
		}
	}
	return res, nil
}

// DeleteResult is what a successful Delete did.
type DeleteResult struct {
	// Key is the deployment.
	Key Key
	// Outcome is Deleted or Absent.
	Outcome Outcome
	// Entry is the removed entry when Outcome is Deleted.
	Entry Entry
	// LostReply is set when an index write of this call lost its reply and
	// could not be proven to have landed or not, but the index read
	// afterwards no longer held the entry (Outcome Absent).
	LostReply bool
}

// Delete removes the deployment's index entry. Payloads stay where they are.
func (c *Committer) Delete(ctx context.Context, k Key) (DeleteResult, error) {
	if _, err := NewKey(k.NodeGroup, k.Name); err != nil {
		return DeleteResult{}, err
	}
	res := DeleteResult{Key: k}
	r, err := c.commit(ctx, mutation{
		op:  "delete",
		key: k,
		holds: func(ix *Index) bool {
			_, ok := ix.Lookup(k)
			return !ok
		},
		apply: func(_ context.Context, ix *Index, _ string) error {
			res.Entry, _ = ix.Remove(k)
			return nil
		},
	})
	if err != nil {
		return DeleteResult{}, err
	}
	res.Outcome = Deleted
	if r != wrote {
		res.Outcome, res.Entry, res.LostReply = Absent, Entry{}, r == heldAfterLostReply
	}
	return res, nil
}

// entry validates d and returns the index entry it commits.
func (d Deployment) entry() (Entry, error) {
	if _, err := NewKey(d.Key.NodeGroup, d.Key.Name); err != nil {
		return Entry{}, err
	}
	if err := validateNamespace(d.Namespace); err != nil {
		return Entry{}, err
	}
	if len(d.Pod) == 0 {
		return Entry{}, fmt.Errorf("deployment %q has an empty Pod payload: extract the Pod from its DaemonSet first", d.Key)
	}
	ns, err := podNamespace(d.Pod)
	if err != nil {
		return Entry{}, fmt.Errorf("deployment %q: %w: pass the canonical Pod YAML extracted from the DaemonSet", d.Key, err)
	}
	if ns != d.Namespace {
		return Entry{}, fmt.Errorf("deployment %q: the Pod payload is in namespace %q, not %q: pass the namespace of the extracted Pod", d.Key, ns, d.Namespace)
	}
	if (d.ServiceName == "") != (len(d.Service) == 0) {
		return Entry{}, fmt.Errorf("deployment %q: a Service needs both its name and its payload", d.Key)
	}
	var e Entry
	if e.Pod, err = PodPayloadPath(d.Key.NodeGroup, d.Pod); err != nil {
		return Entry{}, err
	}
	if d.ServiceName != "" {
		if e.Service, err = ServicePayloadPath(d.Namespace, d.ServiceName, d.Service); err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}

// ensurePayload makes the payload object at p hold data, and reports
// whether it had to repair it: rewrite an object that held other bytes, or
// one that was missing although the index references it. Because p is the
// SHA-512 of its bytes, an object whose bytes do not match is garbage
// whoever wrote it: it is replaced with a write conditional on that
// object's ETag, so a concurrent repair or rewrite is never overwritten
// blindly. Any failure aborts before the index is written, and a
// half-written payload is invisible because nothing references it.
//
// A payload expected to exist (the index references it, or the cache has
// a stamp of it from an earlier verification) is looked at with one Head:
// the recorded stamp proves it intact without reading it, and any other
// stamp gets its bytes read and verified. Any other payload is created
// create-only, and an object already there is read and verified.
func (c *Committer) ensurePayload(ctx context.Context, p string, data []byte, referenced bool) (repaired bool, err error) {
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("write payload %q: %w: the deployment index was not changed; run deploy again", p, err)
	}
	known, stamped := stampedIn(c.opts.Cache, p)
	create := true
	if referenced || stamped {
		info, err := c.store.Head(ctx, p)
		switch {
		case err == nil && stamped && known.Matches(stampOf(info)):
			return false, nil
		case err == nil:
			create = false // there, but not known to be intact: read it
		case errors.Is(err, objstore.ErrNotFound):
			repaired = referenced
		default:
			return false, fmt.Errorf("check payload %q: %w: the deployment index was not changed; run deploy again", p, err)
		}
	}
	for range 3 {
		if create {
			etag, err := c.store.PutIfAbsent(ctx, p, data)
			if err == nil {
				recordVerified(c.opts.Cache, p, data, Stamp{ETag: etag, Size: int64(len(data))})
				return repaired, nil
			}
			if !errors.Is(err, objstore.ErrPrecondition) {
				return fail(err)
			}
			repaired = false // another writer created it meanwhile
		}
		create = true
		obj, err := c.store.Get(ctx, p, objstore.GetOptions{})
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			continue // removed since: create it again
		case err != nil:
			return false, fmt.Errorf("verify existing payload %q: %w: the deployment index was not changed; run deploy again", p, err)
		}
		if VerifyPayload(p, obj.Data) == nil {
			recordVerified(c.opts.Cache, p, obj.Data, Stamp{ETag: obj.ETag, Size: int64(len(obj.Data))})
			return repaired, nil
		}
		etag, err := c.store.PutIfMatch(ctx, p, data, obj.ETag)
		switch {
		case err == nil:
			recordVerified(c.opts.Cache, p, data, Stamp{ETag: etag, Size: int64(len(data))})
			return true, nil
		case errors.Is(err, objstore.ErrPrecondition), errors.Is(err, objstore.ErrNotFound):
			// changed under us: look again
		default:
			return false, fmt.Errorf("replace corrupt payload %q: %w: the deployment index was not changed; run deploy again", p, err)
		}
	}
	return false, fmt.Errorf("write payload %q: %w: it kept changing while being verified: the deployment index was not changed; run deploy again", p, ErrCorruptPayload)
}

// cachePayload remembers verified payload bytes in the local cache.
func (c *Committer) cachePayload(p string, data []byte) {
	if c.opts.Cache == nil {
		return
	}
	if d, err := payloadDigest(p); err == nil {
		_ = c.opts.Cache.Put(d, data) // a cache that cannot write only costs a later read
	}
}

// namespaceOf finds the namespace of the DaemonSet an entry describes. The
// index holds only paths, so it comes from the Service path when there is one
// (a Service shares its DaemonSet's namespace) and otherwise from the Pod
// payload's metadata.namespace, read from the payload cache or, on a miss,
// fetched and verified. A payload that cannot be read yields "".
func (c *Committer) namespaceOf(ctx context.Context, e Entry) string {
	if id, ok := e.ServiceID(); ok {
		return id.Namespace
	}
	data, err := FetchPayloadCached(ctx, c.store, c.opts.Cache, e.Pod)
	if err != nil {
		return ""
	}
	ns, _ := podNamespace(data)
	return ns
}

// podNamespace reads metadata.namespace from Pod YAML; an omitted namespace
// is "default", as in Kubernetes.
func podNamespace(podYAML []byte) (string, error) {
	var pod struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(podYAML, &pod); err != nil {
		return "", fmt.Errorf("decode Pod metadata: %w", err)
	}
	if pod.Metadata.Namespace == "" {
		return "default", nil
	}
	return pod.Metadata.Namespace, nil
}
