// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"slices"
	"sync"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/state"
)

// Service is one Service of the NodeGroup's desired state, with the static
// Pod that backs it on this node.
type Service struct {
	// Deployment owns the Service.
	Deployment state.Key
	// ID is <namespace>/<service>.
	ID state.ServiceID
	// Spec is the decoded, validated Service payload.
	Spec *manifest.Service
	// Pod is the backing static Pod's name; Revision its podmin.dev/revision.
	Pod, Revision string
}

// Publisher receives the NodeGroup's complete Service desired state after
// its Pods are committed and stale files are removed. The milestone-2
// coordinator implements it; until then Recorder keeps it in memory.
type Publisher interface {
	PublishServices(ctx context.Context, services []Service) error
}

// Recorder is a Publisher that remembers the last published set.
type Recorder struct {
	mu       sync.Mutex
	last     []Service
	versions int
}

// PublishServices implements Publisher.
func (r *Recorder) PublishServices(_ context.Context, services []Service) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = slices.Clone(services)
	r.versions++
	return nil
}

// Last returns the last published set and how many sets were published.
func (r *Recorder) Last() ([]Service, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.last), r.versions
}
