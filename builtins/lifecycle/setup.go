// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// ErrNotOwned reports an operation refused because Podmin cannot prove
// that the cluster owns what it would change or delete (an untagged
// bucket, a VPC it did not create): a refusal for safety.
var ErrNotOwned = infra.ErrNotOwned

// PlanSummary is what setup, teardown or destroy will change in the
// provider's infrastructure, shown before confirmation.
type PlanSummary struct {
	// Add, Change and Destroy count resources in the OpenTofu/Terraform
	// plan; all zero on the local provider.
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
	// Steps describes, in order, what is applied.
	Steps []string `json:"steps"`
	// Text is the tool's rendering of the plan, for a terminal.
	Text string `json:"-"`
}

// Infra is a provider's compute and networking, as setup, teardown and
// destroy drive it. The local provider has none; the AWS one renders the
// embedded module and runs OpenTofu/Terraform.
type Infra interface {
	// Prepare checks cl against the provider's API and completes it
	// (zones, architectures, images). It writes nothing.
	Prepare(ctx context.Context, cl *infra.Cluster) error
	// Plan writes the working files and returns what Apply changes.
	Plan(ctx context.Context, cl infra.Cluster) (PlanSummary, error)
	// Config returns the cluster configuration setup stores at
	// tfstate/podmin.auto.tfvars.json; it holds no secret.
	Config(cl infra.Cluster) ([]byte, error)
	// Commit writes what the plan depends on outside the provider (the
	// nodes' dependencies) once the plan is confirmed; Plan only stages
	// it.
	Commit(ctx context.Context, cl infra.Cluster) error
	// Apply applies the plan Plan returned.
	Apply(ctx context.Context, cl infra.Cluster) error
	// PlanDestroy returns what Destroy removes.
	PlanDestroy(ctx context.Context, c contexts.Context) (PlanSummary, error)
	// Destroy removes the compute and networking this cluster owns.
	Destroy(ctx context.Context, c contexts.Context) error
}

// infraFor returns the infrastructure of c's provider.
func infraFor(ctx context.Context, h Host, c contexts.Context) (Infra, error) {
	if c.Provider == "local" {
		return localInfra{h: h}, nil
	}
	return h.Infrastructure(ctx, c)
}

// SetupResult reports what setup did.
type SetupResult struct {
	Cluster infra.Cluster `json:"cluster"`
	Plan    PlanSummary   `json:"plan"`
	// Applied is false when the plan was not applied (a dry run records
	// the apply instead).
	Applied bool `json:"applied"`
	// Secrets are the CA secrets, created or kept.
	Secrets []SecretAction `json:"secrets"`
	// ConfigPublished is the bucket key of the cluster configuration the
	// agents read; ConfigChanged is false when it was already current.
	ConfigPublished string `json:"configPublished"`
	ConfigChanged   bool   `json:"configChanged"`
	// LocalAgents says how to start the node agents of a local cluster.
	LocalAgents []LocalAgent `json:"localAgents,omitempty"`
}

// Setup validates every input, checks it against the provider, shows the
// plan, asks opts.Confirm, then publishes the nodes' dependencies, stores
// the CA secrets (create-only), publishes the cluster configuration and
// applies the infrastructure. Nothing is written before the confirmation.
func Setup(ctx context.Context, h Host, opts SetupOptions) (SetupResult, error) {
	c, err := h.CurrentContext()
	if err != nil {
		return SetupResult{}, err
	}
	cl, err := parseSetup(opts, c)
	if err != nil {
		return SetupResult{}, err
	}
	inf, err := infraFor(ctx, h, c)
	if err != nil {
		return SetupResult{}, err
	}
	if err := inf.Prepare(ctx, &cl); err != nil {
		return SetupResult{}, err
	}
	res := SetupResult{Cluster: cl, ConfigPublished: state.TFVarsPath}
	if res.Plan, err = inf.Plan(ctx, cl); err != nil {
		return res, err
	}
	// The configuration is rendered before anything is written, so a
	// failure leaves the secrets and the bucket untouched.
	cfg, err := inf.Config(cl)
	if err != nil {
		return res, err
	}
	if opts.Confirm != nil {
		if err := opts.Confirm(res.Plan); err != nil {
			return res, err
		}
	}
	if err := inf.Commit(ctx, cl); err != nil {
		return res, err
	}
	if res.Secrets, err = ensureCASecrets(ctx, h, c); err != nil {
		return res, err
	}
	if res.ConfigChanged, err = publishClusterConfig(ctx, h, c, cfg); err != nil {
		return res, err
	}
	if err := inf.Apply(ctx, cl); err != nil {
		return res, err
	}
	res.Applied = true
	if c.Provider == "local" {
		res.LocalAgents = localAgents(h, c, cl)
	}
	return res, nil
}

// ClusterConfig is the cluster configuration setup publishes at
// tfstate/podmin.auto.tfvars.json for the agents: the validated cluster
// without any secret.
type ClusterConfig struct {
	Version int `json:"version"`
	infra.Cluster
}

// publishClusterConfig writes the configuration when it differs from the
// published one.
func publishClusterConfig(ctx context.Context, h Host, c contexts.Context, data []byte) (bool, error) {
	_, b, err := h.OpenCluster(ctx)
	if err != nil {
		return false, err
	}
	cur, err := b.Get(ctx, state.TFVarsPath, objstore.GetOptions{})
	switch {
	case err == nil && bytes.Equal(cur.Data, data):
		return false, nil
	case err != nil && !errors.Is(err, objstore.ErrNotFound):
		return false, fmt.Errorf("read the cluster configuration %s: %w", state.TFVarsPath, err)
	}
	if err == nil {
		// Another cluster's configuration in a shared bucket is never
		// replaced: only its own cluster ID proves it is ours to change.
		if owner, jerr := state.ParseClusterSettings(cur.Data); jerr != nil || owner.Cluster != c.Cluster {
			return false, fmt.Errorf("%w: %s in bucket %s belongs to cluster %q, not %q: nothing was changed; use a bucket of its own for this cluster", ErrNotOwned, state.TFVarsPath, c.Bucket, owner.Cluster, c.Cluster)
		}
		_, err = b.PutIfMatch(ctx, state.TFVarsPath, data, cur.ETag)
	} else {
		_, err = b.PutIfAbsent(ctx, state.TFVarsPath, data)
	}
	if errors.Is(err, objstore.ErrPrecondition) || errors.Is(err, objstore.ErrNotFound) {
		return false, fmt.Errorf("publish the cluster configuration %s in bucket %s: it changed while setup ran: run setup again: %w", state.TFVarsPath, c.Bucket, err)
	}
	if err != nil {
		return false, fmt.Errorf("publish the cluster configuration %s in bucket %s: %w", state.TFVarsPath, c.Bucket, err)
	}
	progressf(h, "published the cluster configuration at %s", state.TFVarsPath)
	return true, nil
}

// readClusterConfig returns the published configuration, or ok=false when
// there is none.
func readClusterConfig(ctx context.Context, b objstore.Store) (ClusterConfig, string, bool, error) {
	obj, err := b.Get(ctx, state.TFVarsPath, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return ClusterConfig{}, "", false, nil
	}
	if err != nil {
		return ClusterConfig{}, "", false, fmt.Errorf("read the cluster configuration %s: %w", state.TFVarsPath, err)
	}
	var cfg ClusterConfig
	if err := json.Unmarshal(obj.Data, &cfg); err != nil {
		return ClusterConfig{}, "", false, fmt.Errorf("the cluster configuration %s is not valid JSON: %w", state.TFVarsPath, err)
	}
	return cfg, obj.ETag, true, nil
}
