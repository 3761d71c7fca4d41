// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

// Defaults of the specification's Infrastructure section.
const (
	DefaultSize         = 1
	DefaultDiskSize     = 20
	DefaultInstanceType = "t4g.small"
	DefaultNAT64Type    = "t4g.nano"
	MinDiskSize         = 8
	MaxDiskSize         = 16384
	MaxSize             = 1000
)

// Cluster is everything setup builds for one cluster, validated. Secret
// values are not part of it.
type Cluster struct {
	// ID is the cluster ID; it is every resource's podmin:cluster tag.
	ID string `json:"cluster"`
	// Provider is aws or local.
	Provider string `json:"provider"`
	Region   string `json:"region"`
	Bucket   string `json:"bucket"`
	// VPCCIDR is the private IPv4 primary CIDR of the VPC (empty on local).
	VPCCIDR string `json:"vpc_cidr,omitempty"`
	// NAT64 is the shared NAT64 instance type; empty means no NAT64.
	NAT64 string `json:"nat64,omitempty"`
	// NodeGroups in the order given; names are unique.
	NodeGroups []NodeGroup `json:"nodegroups"`
	// WorkloadCAPublish is the external s3://BUCKET/KEY copy of the
	// workload CA bundle, when set.
	WorkloadCAPublish *S3Object `json:"workload_ca_publish,omitempty"`
	// OtelLogs is the canonical --otel-logs value (otellogs.Options'
	// String) the nodes export container logs with; empty disables it.
	OtelLogs string `json:"otel_logs,omitempty"`
	// NAT64Arch maps every NAT64 instance type to its architecture, as
	// the provider API reports it.
	NAT64Arch map[string]string `json:"nat64_arch,omitempty"`
	// AgentSource is a local Podmin checkout the node agent is
	// cross-compiled from (--agent-source); it is never published.
	AgentSource string `json:"-"`
}

// NodeGroup is one Auto Scaling Group of identical VMs.
type NodeGroup struct {
	Name         string `json:"name"`
	Size         int    `json:"size"`
	DiskSize     int    `json:"disk_size"`
	InstanceType string `json:"instance_type,omitempty"`
	// Zone is a full zone name, a one-letter suffix before resolution, or
	// empty for the region's first available zone.
	Zone string `json:"zone,omitempty"`
	// NAT64 is the instance type of a dedicated NAT64 instance; empty
	// means the zone's shared one (when the cluster has NAT64).
	NAT64 string `json:"nat64,omitempty"`
	// Arch is amd64 or arm64, resolved from the instance type.
	Arch string `json:"arch,omitempty"`
}

// S3Object is one exact object, s3://Bucket/Key.
type S3Object struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

// String returns the s3:// form.
func (o S3Object) String() string { return "s3://" + o.Bucket + "/" + o.Key }

// Architectures returns the sorted set of architectures the NodeGroups
// use.
func (c Cluster) Architectures() []string {
	seen := map[string]bool{}
	for _, ng := range c.NodeGroups {
		if ng.Arch != "" {
			seen[ng.Arch] = true
		}
	}
	var out []string
	for _, a := range []string{"amd64", "arm64"} {
		if seen[a] {
			out = append(out, a)
		}
	}
	return out
}
