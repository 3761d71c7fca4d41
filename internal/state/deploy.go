// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"errors"
	"fmt"

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
	// Unchanged: the entry already equalled the deployed one; the index was
	// not written.
	Unchanged Outcome = "unchanged"
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
type Replacement struct {
	// Namespace is the replaced DaemonSet's namespace, or empty when its Pod
	// payload could not be read to find out.
	Namespace string
	// Entry is the replaced index entry.
	Entry Entry
}

// DeployResult is what a successful Deploy committed.
type DeployResult struct {
	// Key is the deployment.
	Key Key
	// Outcome is Created, Updated or Unchanged.
	Outcome Outcome
	// Entry is the deployment's entry in the index after the commit.
	Entry Entry
	// Replaced is set when a DaemonSet of another namespace was replaced.
	Replaced *Replacement
}

// DeleteResult is what a successful Delete did.
type DeleteResult struct {
	// Key is the deployment.
	Key Key
	// Outcome is Deleted or Absent.
	Outcome Outcome
	// Entry is the removed entry when Outcome is Deleted.
	Entry Entry
}

// Deploy stores the deployment's payloads and commits its index entry.
// Success means the index held the entry when Deploy returned; nodes
// converge asynchronously. A Service identity owned by another deployment
// fails with ErrConflict, and nothing is written to the index then.
func (c *Committer) Deploy(ctx context.Context, d Deployment) (DeployResult, error) {
	entry, err := d.entry()
	if err != nil {
		return DeployResult{}, err
	}
	if err := c.writePayload(ctx, entry.Pod, d.Pod); err != nil {
		return DeployResult{}, err
	}
	if entry.Service != "" {
		if err := c.writePayload(ctx, entry.Service, d.Service); err != nil {
			return DeployResult{}, err
		}
	}
	res := DeployResult{Key: d.Key, Entry: entry}
	namespaces := map[string]string{} // Pod path → namespace; payloads are immutable
	err = c.commit(ctx, mutation{
		op:  "deploy",
		key: d.Key,
		apply: func(ctx context.Context, ix *Index) (bool, error) {
			res.Outcome, res.Replaced = Unchanged, nil
			prev, existed, err := ix.Set(d.Key, entry)
			switch {
			case err != nil:
				return false, err
			case !existed:
				res.Outcome = Created
				return true, nil
			case prev == entry:
				return false, nil
			}
			res.Outcome = Updated
			if prev.Pod == entry.Pod {
				return true, nil // same Pod bytes, so the same namespace
			}
			if ns := c.namespaceOf(ctx, prev, namespaces); ns != d.Namespace {
				res.Replaced = &Replacement{Namespace: ns, Entry: prev}
			}
			return true, nil
		},
		target: func(e Entry, ok bool) bool { return ok && e == entry },
	})
	if err != nil {
		return DeployResult{}, err
	}
	return res, nil
}

// Delete removes the deployment's index entry. Payloads stay where they are.
func (c *Committer) Delete(ctx context.Context, k Key) (DeleteResult, error) {
	if _, err := NewKey(k.NodeGroup, k.Name); err != nil {
		return DeleteResult{}, err
	}
	res := DeleteResult{Key: k}
	err := c.commit(ctx, mutation{
		op:  "delete",
		key: k,
		apply: func(_ context.Context, ix *Index) (bool, error) {
			prev, existed := ix.Remove(k)
			res.Outcome, res.Entry = Absent, Entry{}
			if existed {
				res.Outcome, res.Entry = Deleted, prev
			}
			return existed, nil
		},
		target: func(_ Entry, ok bool) bool { return !ok },
	})
	if err != nil {
		return DeleteResult{}, err
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

// writePayload creates a payload object unless it exists; an existing one is
// verified instead of rewritten. Any failure aborts before the index is read,
// and a half-written payload is invisible because nothing references it.
func (c *Committer) writePayload(ctx context.Context, p string, data []byte) error {
	_, err := c.store.PutIfAbsent(ctx, p, data)
	if err == nil {
		return nil
	}
	if !errors.Is(err, objstore.ErrPrecondition) {
		return fmt.Errorf("write payload %q: %w: the deployment index was not changed; run deploy again", p, err)
	}
	if _, err := FetchPayload(ctx, c.store, p); err != nil {
		return fmt.Errorf("verify existing payload: %w", err)
	}
	return nil
}

// namespaceOf finds the namespace of the DaemonSet an entry describes. The
// index holds only paths, so it comes from the Service path when there is one
// (a Service shares its DaemonSet's namespace) and otherwise from the Pod
// payload's metadata.namespace. A payload that cannot be read yields "": the
// replacement is then reported with an unknown namespace rather than failing
// the deploy that would repair it.
func (c *Committer) namespaceOf(ctx context.Context, e Entry, cache map[string]string) string {
	if id, ok := e.ServiceID(); ok {
		return id.Namespace
	}
	if ns, ok := cache[e.Pod]; ok {
		return ns
	}
	ns := ""
	if data, err := FetchPayload(ctx, c.store, e.Pod); err == nil {
		ns, _ = podNamespace(data)
	}
	cache[e.Pod] = ns
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
