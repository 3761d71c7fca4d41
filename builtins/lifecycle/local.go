// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/state"
)

// localInfra is the local provider's infrastructure: none. Node agents
// run on this machine and are started by the operator, so setup only
// stores the CA secrets and publishes the configuration they read, and
// teardown only withdraws that configuration.
type localInfra struct{ h Host }

// Prepare implements Infra: there is no provider API to ask.
func (localInfra) Prepare(context.Context, *infra.Cluster) error { return nil }

// Plan implements Infra.
func (l localInfra) Plan(_ context.Context, cl infra.Cluster) (PlanSummary, error) {
	p := PlanSummary{Steps: []string{
		"store the CA secrets of " + cl.ID + " in the local secrets store (create-only)",
		"publish the cluster configuration at " + state.TFVarsPath,
	}}
	for _, ng := range cl.NodeGroups {
		p.Steps = append(p.Steps, fmt.Sprintf("NodeGroup %s: start %d local node agent(s) yourself", ng.Name, ng.Size))
	}
	return p, nil
}

// Config implements Infra: the validated cluster, which the local
// agents read.
func (localInfra) Config(cl infra.Cluster) ([]byte, error) {
	data, err := json.MarshalIndent(ClusterConfig{Version: 1, Cluster: cl}, "", "  ")
	return append(data, '\n'), err
}

// Commit implements Infra: a local cluster has no node dependencies.
func (localInfra) Commit(context.Context, infra.Cluster) error { return nil }

// Apply implements Infra: nothing runs in a cloud.
func (localInfra) Apply(context.Context, infra.Cluster) error { return nil }

// PlanDestroy implements Infra.
func (l localInfra) PlanDestroy(ctx context.Context, c contexts.Context) (PlanSummary, error) {
	_, b, err := l.h.OpenCluster(ctx)
	if err != nil {
		return PlanSummary{}, err
	}
	cfg, _, ok, err := readClusterConfig(ctx, b)
	if err != nil {
		return PlanSummary{}, err
	}
	if !ok {
		return PlanSummary{Steps: []string{"no cluster configuration is published: no NodeGroups to withdraw"}}, nil
	}
	if cfg.ID != c.Cluster {
		return PlanSummary{}, fmt.Errorf("%w: the cluster configuration %s names cluster %q, not %q: nothing was changed", ErrNotOwned, state.TFVarsPath, cfg.ID, c.Cluster)
	}
	names := make([]string, len(cfg.NodeGroups))
	for i, ng := range cfg.NodeGroups {
		names[i] = ng.Name
	}
	return PlanSummary{Destroy: len(cfg.NodeGroups), Steps: []string{
		fmt.Sprintf("withdraw the cluster configuration %s (NodeGroups %s); stop the local node agents yourself", state.TFVarsPath, strings.Join(names, ", ")),
	}}, nil
}

// Destroy implements Infra: it deletes the published configuration
// only when it names this cluster, and only at the ETag it was read at.
func (l localInfra) Destroy(ctx context.Context, c contexts.Context) error {
	_, b, err := l.h.OpenCluster(ctx)
	if err != nil {
		return err
	}
	cfg, etag, ok, err := readClusterConfig(ctx, b)
	if err != nil || !ok {
		return err
	}
	if cfg.ID != c.Cluster {
		return fmt.Errorf("%w: the cluster configuration %s names cluster %q, not %q: nothing was changed", ErrNotOwned, state.TFVarsPath, cfg.ID, c.Cluster)
	}
	if err := b.Delete(ctx, state.TFVarsPath, etag); err != nil {
		return fmt.Errorf("withdraw the cluster configuration %s: %w", state.TFVarsPath, err)
	}
	progressf(l.h, "withdrew the cluster configuration %s", state.TFVarsPath)
	return nil
}

// LocalAgent is how to start one local node agent.
type LocalAgent struct {
	NodeGroup string `json:"nodegroup"`
	// Command runs the agent with its own root, node ID and node address,
	// and loopback ports the kernel picks (the agent logs them); its
	// --ipv6-prefix is an example /80 from the documentation range,
	// unique per agent.
	Command string `json:"command"`
}

// localAgents returns one agent command per node of every NodeGroup.
// Agents on one machine need their own root and ports, the agents of
// every cluster on it included: fixed port numbers would collide between
// two clusters, so every listener takes port 0 (a free port) and the node
// ID and address, which would otherwise follow the API port, are set per
// node.
func localAgents(h Host, c contexts.Context, cl infra.Cluster) []LocalAgent {
	bucket := h.AgentBucket(c)
	var out []LocalAgent
	for i, ng := range cl.NodeGroups {
		for n := 1; n <= ng.Size; n++ {
			node := fmt.Sprintf("%s-%d", ng.Name, n)
			root := h.AgentRoot(c.Cluster, node)
			out = append(out, LocalAgent{NodeGroup: ng.Name, Command: fmt.Sprintf(
				"PODMIN_ROOT=%s PODMIN_AGENT_NODE_ID=%s PODMIN_AGENT_NODE_ADDR=2001:db8::%x:%x "+
					"PODMIN_AGENT_HEALTH_ADDR=127.0.0.1:0 PODMIN_AGENT_API_ADDR=[::1]:0 PODMIN_AGENT_DNS_ADDR=127.0.0.1:0 PODMIN_AGENT_REGISTRY_ADDR=127.0.0.1:0 "+
					"podmin-agent --provider local --bucket %s --region local --cluster %s --nodegroup %s --ipv6-prefix 2001:db8:0:%x:%x::/80",
				root, node, i+1, n, bucket, c.Cluster, ng.Name, i+1, n)})
		}
	}
	return out
}
