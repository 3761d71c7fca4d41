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

	"podmin.dev/podmin/internal/contexts"
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
	nat64DataNetnum  = 192 // local.nat64_data_netnum
	nat64MgmtNetnum  = 224 // local.nat64_mgmt_netnum
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
	// Previous is the variables the last setup published (zero before the
	// first): every subnet slot it assigned stays (Allocate).
	Previous Vars
	// CreateNonce is the nonce every resource the module creates is
	// tagged with (podmin:create-nonce): drawn when the cluster's first
	// setup planned, then kept in the published variables. Destroy deletes
	// a created VPC only when it carries it.
	CreateNonce string
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
	// CreateNonce is Inputs.CreateNonce.
	CreateNonce string `json:"create_nonce"`
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

// Allocation is the subnet slots of a cluster: each NodeGroup's /64
// netnum (0-191 below the VPC's /56) and each NAT64 instance's slot (its
// data and management /64s and its IPv4 data subnet). A slot, once
// assigned, never changes: it is the subnet's CIDR, and a live subnet's
// CIDR cannot move.
type Allocation struct {
	NodeGroups map[string]int
	NAT64      map[string]int
}

// Allocate keeps every slot prev (the variables the last setup published;
// zero before the first) assigned to a NodeGroup or NAT64 instance that
// still exists, and gives each new one the slot its name hashes to,
// probing past slots that are taken or were in prev (a subnet removed in
// this setup may still exist while its replacement is created).
func Allocate(c Cluster, prev Vars) (Allocation, error) {
	names := make([]string, len(c.NodeGroups))
	for i, ng := range c.NodeGroups {
		names[i] = ng.Name
	}
	if len(names) > nodegroupNetnums {
		return Allocation{}, fmt.Errorf("%d NodeGroups do not fit the %d IPv6 /64 subnets Podmin assigns to NodeGroups", len(names), nodegroupNetnums)
	}
	had := map[string]int{}
	for n, v := range prev.NodeGroups {
		had[n] = v.SubnetIndex
	}
	a := Allocation{NodeGroups: keepSlots(names, had, nodegroupNetnums)}
	nats := c.NAT64Instances()
	capacity := min(nat64Slots, nat64Capacity(c.VPCCIDR))
	if len(nats) > capacity {
		return Allocation{}, fmt.Errorf("%d NAT64 instances need %d IPv4 /28 subnets, but --vpc-cidr %s holds %d: use a larger VPC CIDR or fewer dedicated NAT64 instances", len(nats), len(nats), c.VPCCIDR, capacity)
	}
	names = make([]string, len(nats))
	for i, n := range nats {
		names[i] = n.Name
	}
	had = map[string]int{}
	for n, v := range prev.NAT64 {
		had[n] = v.SubnetIndex
	}
	a.NAT64 = keepSlots(names, had, max(capacity, 1))
	return a, nil
}

// keepSlots gives every name its slot in had when it is below n and not
// taken twice, and every other name the slot its FNV-1a hash modulo n
// gives, probing in name order past slots taken or in had. When that
// leaves none free, a slot only a removed name had is reused.
func keepSlots(names []string, had map[string]int, n int) map[string]int {
	out := map[string]int{}
	used := map[int]bool{}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, name := range sorted {
		if i, ok := had[name]; ok && i >= 0 && i < n && !used[i] {
			out[name], used[i] = i, true
		}
	}
	reserved := map[int]bool{}
	for _, i := range had {
		reserved[i] = true
	}
	open := 0
	for i := range n {
		if !used[i] && !reserved[i] {
			open++
		}
	}
	free := func(i int) bool { return !used[i] && !reserved[i] }
	if open < len(sorted)-len(out) {
		free = func(i int) bool { return !used[i] }
	}
	for _, name := range sorted {
		if _, ok := out[name]; ok {
			continue
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(name))
		i := int(h.Sum32() % uint32(n))
		for !free(i) {
			i = (i + 1) % n
		}
		out[name], used[i] = i, true
	}
	return out
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
	if !contexts.ProvenBy(in.CreateNonce, in.CreateNonce) {
		return v, errors.New("no valid create nonce (a Podmin bug: setup draws it or reads it from the published variables)")
	}
	v.CreateNonce = in.CreateNonce
	alloc, err := Allocate(c, in.Previous)
	if err != nil {
		return v, err
	}
	idx, slots := alloc.NodeGroups, alloc.NAT64
	arches := map[string]bool{}
	via := map[string]string{}
	nats := c.NAT64Instances()
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
