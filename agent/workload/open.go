// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"errors"
	"log/slog"

	"podmin.dev/podmin/internal/secrets"
)

// Open reads the workload CA key from r, the provider's system store, and
// returns the manager of opts (whose Key it sets). A node without the
// store, or a cluster whose key does not exist yet (podmin setup has not
// run), gets no identities: it still publishes Pods, and log says how to
// fix it. Every other failure to read the key is an error.
func Open(ctx context.Context, r KeyReader, opts Options, log *slog.Logger) (*Manager, error) {
	if r == nil {
		log.Warn("workload identities disabled: the Podmin data directory holding the local secrets store is unknown; set XDG_DATA_HOME")
		return nil, nil
	}
	key, err := ReadKey(ctx, r, opts.Cluster)
	if errors.Is(err, secrets.ErrNotFound) {
		log.Warn("workload identities disabled until the agent restarts: the cluster has no workload CA key yet", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	opts.Key = key
	return New(opts)
}
