// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// IndexServices returns an Options.Services that reads the namespaced
// Services of every NodeGroup from deployments/index.json: the DNS
// identities the leader publishes. A missing index has no Services.
func IndexServices(store objstore.Store) func(ctx context.Context) ([]ServiceID, error) {
	return func(ctx context.Context) ([]ServiceID, error) {
		ix, _, err := state.ReadIndex(ctx, store)
		if err != nil {
			return nil, err
		}
		var out []ServiceID
		for _, it := range ix.Items() {
			if id, ok := it.Entry.ServiceID(); ok {
				out = append(out, ServiceID{Namespace: id.Namespace, Name: id.Name})
			}
		}
		return out, nil
	}
}
