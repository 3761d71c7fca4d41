// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"podmin.dev/podmin/internal/paths"
)

// awsModule is the AWS OpenTofu/Terraform module: static .tf files and the
// .tftpl templates they render with templatefile().
//
//go:embed aws/*.tf aws/*.tftpl
var awsModule embed.FS

// VarsFile is the generated variables file in the module directory.
const VarsFile = "podmin.auto.tfvars.json"

// nodegroupNetnums and nat64Slots bound the IPv6 /64s below the VPC's /56
// (see locals.tf): NodeGroups take netnums 0-191, NAT64 instances 32 pairs.
const (
	nodegroupNetnums = 192
	nat64Slots       = 32
)

// ModuleDir is <cache>/infrastructure/<cluster-id>.
func ModuleDir(cacheDir, cluster string) string {
	return filepath.Join(cacheDir, "infrastructure", cluster)
}

// Inputs are what rendering needs beyond the validated Cluster: the
// answers of the provider API and the node bootstrap.
type Inputs struct {
	// AccountID pins the provider to one account; empty skips the check.
	AccountID string
	// ExistingVPCID is the reused VPC, or empty to create one.
	ExistingVPCID string
	// AMIs maps every architecture in use to its pinned AMI.
	AMIs map[string]string
	// LaunchGeneration changes on every setup.
	LaunchGeneration string
	// UserData maps every NodeGroup to its base64 launch-template user
	// data (the node bootstrap renders it).
	UserData map[string]string
	// JoolArchives maps every NAT64 architecture to its mirrored archive.
	JoolArchives map[string]JoolArchive
}

// JoolArchive is one mirrored podplane/jool-builds archive.
type JoolArchive struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
}

// Vars is podmin.auto.tfvars.json: the module's variables, no secret.
type Vars struct {
	Cluster           string                  `json:"cluster"`
	Region            string                  `json:"region"`
	AccountID         string                  `json:"account_id"`
	Bucket            string                  `json:"bucket"`
	VPCCIDR           string                  `json:"vpc_cidr"`
	ExistingVPCID     string                  `json:"existing_vpc_id"`
	AMIs              map[string]string       `json:"amis"`
	LaunchGeneration  string                  `json:"launch_generation"`
	NodeGroups        map[string]NodeGroupVar `json:"nodegroups"`
	NAT64             map[string]NAT64Var     `json:"nat64"`
	WorkloadCAPublish *S3ObjectVar            `json:"workload_ca_publish"`
	// OtelLogs is the canonical --otel-logs value; empty disables log
	// export.
	OtelLogs     string                 `json:"otel_logs"`
	JoolArchives map[string]JoolArchive `json:"jool_archives"`
}

// NodeGroupVar is one entry of the nodegroups variable.
type NodeGroupVar struct {
	Size         int    `json:"size"`
	DiskSize     int    `json:"disk_size"`
	InstanceType string `json:"instance_type"`
	Zone         string `json:"zone"`
	Arch         string `json:"arch"`
	SubnetIndex  int    `json:"subnet_index"`
	// NAT64 names the NAT64 instance the NodeGroup routes through.
	NAT64    string `json:"nat64"`
	UserData string `json:"user_data"`
}

// NAT64Var is one NAT64 instance.
type NAT64Var struct {
	Zone         string `json:"zone"`
	InstanceType string `json:"instance_type"`
	Arch         string `json:"arch"`
	SubnetIndex  int    `json:"subnet_index"`
}

// S3ObjectVar is the workload_ca_publish variable.
type S3ObjectVar struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

// NAT64Instance is one NAT64 instance the cluster needs.
type NAT64Instance struct {
	Name, Zone, InstanceType string
	// NodeGroups route through it.
	NodeGroups []string
}

// NAT64Instances derives the NAT64 instances: one shared instance per zone
// holding a NodeGroup without nat64=, one dedicated instance per NodeGroup
// with nat64=TYPE. Without --nat64 only dedicated ones exist.
func (c Cluster) NAT64Instances() []NAT64Instance {
	byName := map[string]*NAT64Instance{}
	for _, ng := range c.NodeGroups {
		var name, typ string
		switch {
		case ng.NAT64 != "":
			name, typ = "ng-"+ng.Name, ng.NAT64
		case c.NAT64 != "":
			name, typ = "shared-"+ng.Zone, c.NAT64
		default:
			continue
		}
		in := byName[name]
		if in == nil {
			in = &NAT64Instance{Name: name, Zone: ng.Zone, InstanceType: typ}
			byName[name] = in
		}
		in.NodeGroups = append(in.NodeGroups, ng.Name)
	}
	out := make([]NAT64Instance, 0, len(byName))
	for _, in := range byName {
		out = append(out, *in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// subnetIndexes gives every NodeGroup a /64 netnum derived from its name,
// so adding or removing a NodeGroup never renumbers another one's subnet.
func subnetIndexes(names []string) (map[string]int, error) {
	if len(names) > nodegroupNetnums {
		return nil, fmt.Errorf("%d NodeGroups do not fit the %d IPv6 /64 subnets Podmin assigns to NodeGroups", len(names), nodegroupNetnums)
	}
	return hashSlots(names, nodegroupNetnums), nil
}

// hashSlots places each name at its FNV-1a hash modulo n, probing past
// taken slots in name order; len(names) must not exceed n.
func hashSlots(names []string, n int) map[string]int {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	used := map[int]bool{}
	out := map[string]int{}
	for _, name := range sorted {
		h := fnv.New32a()
		_, _ = h.Write([]byte(name))
		i := int(h.Sum32() % uint32(n))
		for used[i] {
			i = (i + 1) % n
		}
		used[i] = true
		out[name] = i
	}
	return out
}

// nat64Indexes gives every NAT64 instance its subnet slot from its name,
// so adding or removing one never renumbers another's subnets.
func nat64Indexes(c Cluster) (map[string]int, error) {
	nats := c.NAT64Instances()
	capacity := min(nat64Slots, nat64Capacity(c.VPCCIDR))
	if len(nats) > capacity {
		return nil, fmt.Errorf("%d NAT64 instances need %d IPv4 /28 subnets, but --vpc-cidr %s holds %d: use a larger VPC CIDR or fewer dedicated NAT64 instances", len(nats), len(nats), c.VPCCIDR, capacity)
	}
	names := make([]string, len(nats))
	for i, n := range nats {
		names[i] = n.Name
	}
	return hashSlots(names, max(capacity, 1)), nil
}

// nat64Capacity is how many NAT64 data subnets a VPC CIDR holds: /28s, at
// most sixteen (see nat64_newbits in locals.tf).
func nat64Capacity(cidr string) int {
	_, bits, ok := strings.Cut(cidr, "/")
	if !ok {
		return 0
	}
	var n int
	if _, err := fmt.Sscanf(bits, "%d", &n); err != nil {
		return 0
	}
	newbits := min(4, 28-n)
	return 1 << newbits
}

// BuildVars turns a prepared cluster (every zone and architecture
// resolved) and the inputs into the module's variables.
func BuildVars(c Cluster, in Inputs) (Vars, error) {
	v := Vars{Cluster: c.ID, Region: c.Region, AccountID: in.AccountID, Bucket: c.Bucket, VPCCIDR: c.VPCCIDR,
		ExistingVPCID: in.ExistingVPCID, AMIs: map[string]string{}, LaunchGeneration: in.LaunchGeneration,
		NodeGroups: map[string]NodeGroupVar{}, NAT64: map[string]NAT64Var{}, JoolArchives: map[string]JoolArchive{}}
	if in.LaunchGeneration == "" {
		return v, errors.New("no launch generation: setup changes it on every run")
	}
	names := make([]string, len(c.NodeGroups))
	for i, ng := range c.NodeGroups {
		names[i] = ng.Name
	}
	idx, err := subnetIndexes(names)
	if err != nil {
		return v, err
	}
	arches := map[string]bool{}
	via := map[string]string{}
	nats := c.NAT64Instances()
	slots, err := nat64Indexes(c)
	if err != nil {
		return v, err
	}
	for _, n := range nats {
		arch, err := archOfNAT64(c, n)
		if err != nil {
			return v, err
		}
		arches[arch] = true
		v.NAT64[n.Name] = NAT64Var{Zone: n.Zone, InstanceType: n.InstanceType, Arch: arch, SubnetIndex: slots[n.Name]}
		for _, ng := range n.NodeGroups {
			via[ng] = n.Name
		}
		if a, ok := in.JoolArchives[arch]; ok {
			v.JoolArchives[arch] = a
		} else {
			return v, fmt.Errorf("no Jool archive for NAT64 architecture %s", arch)
		}
	}
	for _, ng := range c.NodeGroups {
		if ng.Zone == "" || ng.Arch == "" {
			return v, fmt.Errorf("NodeGroup %s has no resolved zone or architecture (a Podmin bug: Prepare resolves them)", ng.Name)
		}
		ud, ok := in.UserData[ng.Name]
		if !ok {
			return v, fmt.Errorf("no user data for NodeGroup %s", ng.Name)
		}
		arches[ng.Arch] = true
		v.NodeGroups[ng.Name] = NodeGroupVar{Size: ng.Size, DiskSize: ng.DiskSize, InstanceType: ng.InstanceType,
			Zone: ng.Zone, Arch: ng.Arch, SubnetIndex: idx[ng.Name], NAT64: via[ng.Name], UserData: ud}
	}
	for a := range arches {
		ami, ok := in.AMIs[a]
		if !ok {
			return v, fmt.Errorf("no AMI pinned for architecture %s", a)
		}
		v.AMIs[a] = ami
	}
	v.OtelLogs = c.OtelLogs
	if c.WorkloadCAPublish != nil {
		v.WorkloadCAPublish = &S3ObjectVar{Bucket: c.WorkloadCAPublish.Bucket, Key: c.WorkloadCAPublish.Key}
	}
	return v, nil
}

// NAT64Arch is set by Prepare for every NAT64 instance type: the
// architecture the EC2 API reported.
func archOfNAT64(c Cluster, n NAT64Instance) (string, error) {
	if a, ok := c.NAT64Arch[n.InstanceType]; ok {
		return a, nil
	}
	return "", fmt.Errorf("NAT64 instance type %s has no resolved architecture (a Podmin bug: Prepare resolves it)", n.InstanceType)
}

// Write replaces the generated module in dir: every embedded .tf and
// .tftpl file and the variables file are written, and stale generated
// files are removed. The initialized provider files (.terraform/) and the
// dependency lock file stay. It returns the written file names, sorted.
func Write(dir string, v Vars) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the module directory: %w", err)
	}
	want := map[string][]byte{}
	err := fs.WalkDir(awsModule, "aws", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := awsModule.ReadFile(p)
		want[path.Base(p)] = data
		return err
	})
	if err != nil {
		return nil, err
	}
	vars, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	want[VarsFile] = append(vars, '\n')
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		n := e.Name()
		generated := strings.HasSuffix(n, ".tf") || strings.HasSuffix(n, ".tftpl") || strings.HasSuffix(n, ".auto.tfvars.json")
		if _, keep := want[n]; generated && !keep && !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return nil, fmt.Errorf("remove the stale generated file %s: %w", n, err)
			}
		}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := paths.WriteFileAtomic(filepath.Join(dir, n), want[n], 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", n, err)
		}
	}
	return names, nil
}
