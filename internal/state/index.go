// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrConflict reports a mutation that would break an index rule, such as a
// second deployment claiming a Service identity.
var ErrConflict = errors.New("conflict")

// Key is a deployment identity, <nodegroup>/<DaemonSet name>. The namespace
// is deliberately not part of it (see the specification): two same-named
// DaemonSets in different namespaces are one deployment in a NodeGroup.
type Key struct {
	// NodeGroup is the NodeGroup the DaemonSet selects.
	NodeGroup string
	// Name is the DaemonSet's (and its Pod's) name.
	Name string
}

// NewKey validates both parts of a deployment key.
func NewKey(nodegroup, name string) (Key, error) {
	if err := validateNodeGroup(nodegroup); err != nil {
		return Key{}, err
	}
	if err := validateDeploymentName(name); err != nil {
		return Key{}, err
	}
	return Key{NodeGroup: nodegroup, Name: name}, nil
}

// ParseKey parses "<nodegroup>/<deployment>" as it appears in the index.
func ParseKey(s string) (Key, error) {
	ng, name, ok := strings.Cut(s, "/")
	if !ok {
		return Key{}, fmt.Errorf("invalid deployment key %q: expected <nodegroup>/<deployment>", s)
	}
	k, err := NewKey(ng, name)
	if err != nil {
		return Key{}, fmt.Errorf("invalid deployment key %q: %w", s, err)
	}
	return k, nil
}

// String is the index form "<nodegroup>/<deployment>".
func (k Key) String() string { return k.NodeGroup + "/" + k.Name }

// ServiceID is a namespaced Service identity, <namespace>/<service>. At most
// one index entry owns each, across all NodeGroups.
type ServiceID struct {
	// Namespace is the Service's (and its DaemonSet's) namespace.
	Namespace string
	// Name is the Service's name.
	Name string
}

// String is "<namespace>/<service>".
func (s ServiceID) String() string { return s.Namespace + "/" + s.Name }

// Entry is one deployment's committed desired state: the paths of its Pod
// payload and optional Service payload. The digests live only in the paths.
type Entry struct {
	// Pod is nodegroups/<nodegroup>/pods/sha512/<digest>.yaml.
	Pod string `json:"pod"`
	// Service is services/<namespace>/<service>/sha512/<digest>.yaml, or
	// empty when the deployment has no Service.
	Service string `json:"service,omitempty"`
}

// ServiceID returns the Service identity the entry owns, if any. It assumes
// a validated entry (as every Entry read from an Index is).
func (e Entry) ServiceID() (ServiceID, bool) {
	if e.Service == "" {
		return ServiceID{}, false
	}
	id, _, err := ParseServicePath(e.Service)
	return id, err == nil
}

// Validate checks that e is a canonical entry for key k: the Pod path is
// content-addressed under k's NodeGroup and the Service path, when present,
// is content-addressed.
func (e Entry) Validate(k Key) error {
	_, _, err := e.validate(k)
	return err
}

// validate is Validate that also returns the Service identity, so callers
// parse each path once.
func (e Entry) validate(k Key) (ServiceID, bool, error) {
	ng, _, err := ParsePodPath(e.Pod)
	if err != nil {
		return ServiceID{}, false, fmt.Errorf("deployment %q: %w", k, err)
	}
	if ng != k.NodeGroup {
		return ServiceID{}, false, fmt.Errorf("deployment %q: Pod path %q belongs to NodeGroup %q, not %q", k, e.Pod, ng, k.NodeGroup)
	}
	if e.Service == "" {
		return ServiceID{}, false, nil
	}
	id, _, err := ParseServicePath(e.Service)
	if err != nil {
		return ServiceID{}, false, fmt.Errorf("deployment %q: %w", k, err)
	}
	return id, true, nil
}

// Item is one keyed entry of an index listing.
type Item struct {
	// Key is the deployment.
	Key Key
	// Entry is its committed payload paths.
	Entry Entry
}

// Index is the decoded deployments/index.json. Every entry in it is valid
// and every Service identity has at most one owner; the methods keep it so.
// An Index is not safe for concurrent mutation.
type Index struct {
	entries  map[Key]Entry
	services map[ServiceID]Key
	// history holds the revisions entries record, by key; an entry
	// without any has no key here.
	history map[Key][]Revision
	// raw is the canonical text the index was decoded from, if it was,
	// and dirty the keys Set or Remove touched since (see canonical.go).
	raw   *rawIndex
	dirty map[Key]struct{}
}

// NewIndex returns an empty index, the meaning of a missing index object.
func NewIndex() *Index {
	return &Index{entries: map[Key]Entry{}, services: map[ServiceID]Key{}}
}

// Len is the number of deployments.
func (ix *Index) Len() int { return len(ix.entries) }

// Lookup returns the entry for k.
func (ix *Index) Lookup(k Key) (Entry, bool) {
	e, ok := ix.entries[k]
	return e, ok
}

// Items lists every entry in key order (the order of the JSON form).
func (ix *Index) Items() []Item {
	if items, ok := ix.canonicalItems(""); ok {
		return items
	}
	return ix.sorted(func(Key) bool { return true })
}

// NodeGroup lists the entries of one NodeGroup in key order: what an agent
// of that NodeGroup reconciles.
func (ix *Index) NodeGroup(nodegroup string) []Item {
	if items, ok := ix.canonicalItems(nodegroup + "/"); ok {
		return items
	}
	return ix.sorted(func(k Key) bool { return k.NodeGroup == nodegroup })
}

// sorted lists the selected entries ordered by their "<nodegroup>/<name>"
// string, which is not the order of (NodeGroup, Name): "a-b/x" < "a/x".
func (ix *Index) sorted(keep func(Key) bool) []Item {
	type keyed struct {
		s  string
		it Item
	}
	ks := make([]keyed, 0, len(ix.entries))
	for k, e := range ix.entries {
		if keep(k) {
			ks = append(ks, keyed{s: k.String(), it: Item{Key: k, Entry: e}})
		}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.s, b.s) })
	items := make([]Item, len(ks))
	for i := range ks {
		items[i] = ks[i].it
	}
	return items
}

// ServiceOwner returns the deployment that owns a Service identity.
func (ix *Index) ServiceOwner(id ServiceID) (Key, bool) {
	k, ok := ix.services[id]
	return k, ok
}

// Set makes e the entry for k and returns the previous one. It refuses an
// invalid entry and, wrapping ErrConflict, a Service identity that another
// deployment owns; k itself may keep or change its Service.
func (ix *Index) Set(k Key, e Entry) (prev Entry, existed bool, err error) {
	if _, err := NewKey(k.NodeGroup, k.Name); err != nil {
		return Entry{}, false, err
	}
	id, hasService, err := e.validate(k)
	if err != nil {
		return Entry{}, false, err
	}
	if hasService {
		if owner, ok := ix.services[id]; ok && owner != k {
			return Entry{}, false, fmt.Errorf("%w: Service %q is already owned by deployment %q: delete that deployment first or rename the Service",
				ErrConflict, id, owner)
		}
	}
	prev, existed = ix.entries[k]
	if oldID, ok := prev.ServiceID(); existed && ok {
		delete(ix.services, oldID)
	}
	ix.entries[k] = e
	if hasService {
		ix.services[id] = k
	}
	if !existed || prev != e {
		ix.touch(k)
	}
	return prev, existed, nil
}

// Remove deletes the entry for k and returns it.
func (ix *Index) Remove(k Key) (prev Entry, existed bool) {
	prev, existed = ix.entries[k]
	if !existed {
		return Entry{}, false
	}
	if id, ok := prev.ServiceID(); ok {
		delete(ix.services, id)
	}
	delete(ix.entries, k)
	// A deleted deployment's revisions go with its entry: a deployment
	// deployed again under the name starts a new history.
	delete(ix.history, k)
	ix.touch(k)
	return prev, true
}

// references reports whether any entry, or any revision an entry
// records, names payload path p: a payload a rollback may restore is
// expected to exist as much as a current one.
func (ix *Index) references(p string) bool {
	for _, revs := range ix.history {
		for _, r := range revs {
			if r.Pod == p || r.Service == p {
				return true
			}
		}
	}
	if strings.HasPrefix(p, ServicesPrefix) {
		id, _, err := ParseServicePath(p)
		if err != nil {
			return false
		}
		owner, ok := ix.services[id]
		return ok && ix.entries[owner].Service == p
	}
	for _, e := range ix.entries {
		if e.Pod == p {
			return true
		}
	}
	return false
}
