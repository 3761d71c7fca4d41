// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"podmin.dev/podmin/internal/objstore"
)

// ClusterSettings is the part of the published cluster configuration
// (TFVarsPath) that every reader shares: the cluster it belongs to and
// the canonical --otel-logs value (empty when log export is off). Setup
// writes the whole file: the module's variables on AWS, the validated
// cluster on a local context; both carry these keys.
type ClusterSettings struct {
	Cluster  string `json:"cluster"`
	OtelLogs string `json:"otel_logs"`
}

// ParseClusterSettings reads the shared settings from the configuration's
// bytes.
func ParseClusterSettings(data []byte) (ClusterSettings, error) {
	var s ClusterSettings
	if err := json.Unmarshal(data, &s); err != nil {
		return ClusterSettings{}, fmt.Errorf("the cluster configuration %s is not valid JSON: %w: run podmin setup again to republish it", TFVarsPath, err)
	}
	return s, nil
}

// ReadClusterSettings reads the published configuration of cluster. ok is
// false when the bucket has none (a cluster not set up yet); a
// configuration of another cluster is an error.
func ReadClusterSettings(ctx context.Context, store objstore.Store, cluster string) (s ClusterSettings, ok bool, err error) {
	obj, err := store.Get(ctx, TFVarsPath, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return ClusterSettings{}, false, nil
	}
	if err != nil {
		return ClusterSettings{}, false, fmt.Errorf("read the cluster configuration %s: %w", TFVarsPath, err)
	}
	if s, err = ParseClusterSettings(obj.Data); err != nil {
		return ClusterSettings{}, false, err
	}
	if s.Cluster != cluster {
		return ClusterSettings{}, false, fmt.Errorf("the cluster configuration %s belongs to cluster %q, not %q: each cluster needs a bucket of its own", TFVarsPath, s.Cluster, cluster)
	}
	return s, true, nil
}

// NodeGroupSizes reads the configured size of every NodeGroup from the
// cluster configuration's bytes. Setup publishes "nodegroups" as a list of
// {"name", "size"} on a local context and as a map from name to
// {"size", ...} on AWS; both are read. A NodeGroup without a size is left
// out: its size is unknown.
func NodeGroupSizes(data []byte) (map[string]int, error) {
	var doc struct {
		NodeGroups json.RawMessage `json:"nodegroups"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("the cluster configuration %s is not valid JSON: %w: run podmin setup again to republish it", TFVarsPath, err)
	}
	type group struct {
		Name string `json:"name"`
		Size *int   `json:"size"`
	}
	out := map[string]int{}
	if len(doc.NodeGroups) == 0 || string(doc.NodeGroups) == "null" {
		return out, nil
	}
	var list []group
	if err := json.Unmarshal(doc.NodeGroups, &list); err == nil {
		for _, g := range list {
			if g.Name != "" && g.Size != nil && *g.Size >= 0 {
				out[g.Name] = *g.Size
			}
		}
		return out, nil
	}
	var byName map[string]group
	if err := json.Unmarshal(doc.NodeGroups, &byName); err != nil {
		return nil, fmt.Errorf("the cluster configuration %s: \"nodegroups\" is neither a list nor a map of NodeGroups: run podmin setup again to republish it", TFVarsPath)
	}
	for name, g := range byName {
		if g.Size != nil && *g.Size >= 0 {
			out[name] = *g.Size
		}
	}
	return out, nil
}
