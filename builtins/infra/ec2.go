// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"podmin.dev/podmin/internal/contexts"
)

// DebianOwner is the AWS account that publishes the official Debian AMIs.
const DebianOwner = "136693071363"

// ClusterTag is the tag every resource of a cluster carries. It names the
// cluster; it proves nothing, as anyone can copy it.
const ClusterTag = "podmin:cluster"

// NonceTag carries the create nonce (Vars.CreateNonce) on every resource
// the module creates: the proof that this cluster's setup created it.
const NonceTag = "podmin:create-nonce"

// EC2API is the part of the EC2 client setup and destroy use.
type EC2API interface {
	DescribeAvailabilityZones(ctx context.Context, in *ec2.DescribeAvailabilityZonesInput, opts ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error)
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeVpcs(ctx context.Context, in *ec2.DescribeVpcsInput, opts ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error)
	DescribeVpcAttribute(ctx context.Context, in *ec2.DescribeVpcAttributeInput, opts ...func(*ec2.Options)) (*ec2.DescribeVpcAttributeOutput, error)
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeInternetGateways(ctx context.Context, in *ec2.DescribeInternetGatewaysInput, opts ...func(*ec2.Options)) (*ec2.DescribeInternetGatewaysOutput, error)
}

// ErrIncompatible reports provider facts that forbid the requested setup;
// nothing was written or run.
var ErrIncompatible = errors.New("incompatible with the requested setup")

// ResolveZones gives every NodeGroup without zone= the region's first
// available zone and checks that every named zone is available.
func ResolveZones(ctx context.Context, api EC2API, c *Cluster) error {
	out, err := api.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{Filters: []types.Filter{
		{Name: aws.String("zone-type"), Values: []string{"availability-zone"}},
	}})
	if err != nil {
		return fmt.Errorf("list the availability zones of %s: %w", c.Region, err)
	}
	var zones []string
	for _, z := range out.AvailabilityZones {
		if z.State == types.AvailabilityZoneStateAvailable && z.ZoneName != nil {
			zones = append(zones, *z.ZoneName)
		}
	}
	sort.Strings(zones)
	if len(zones) == 0 {
		return fmt.Errorf("%w: region %s reports no available zone", ErrIncompatible, c.Region)
	}
	for i := range c.NodeGroups {
		ng := &c.NodeGroups[i]
		switch {
		case ng.Zone == "":
			ng.Zone = zones[0]
		case !slices.Contains(zones, ng.Zone):
			return fmt.Errorf("%w: --nodegroup %s: zone %s is not an available zone of %s: use one of %s", ErrIncompatible, ng.Name, ng.Zone, c.Region, strings.Join(zones, ", "))
		}
	}
	return nil
}

// ResolveInstanceTypes requires every instance type to be a Nitro type
// with IPv6 and at least two network interfaces, and records each one's
// architecture.
func ResolveInstanceTypes(ctx context.Context, api EC2API, c *Cluster) error {
	arch := map[string]string{}
	check := func(typ, what string) (string, error) {
		if a, ok := arch[typ]; ok {
			return a, nil
		}
		out, err := api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(typ)}})
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceType" || err == nil && len(out.InstanceTypes) == 0 {
			return "", fmt.Errorf("%w: %s: instance type %s does not exist in %s", ErrIncompatible, what, typ, c.Region)
		}
		if err != nil {
			return "", fmt.Errorf("describe instance type %s: %w", typ, err)
		}
		it := out.InstanceTypes[0]
		var why []string
		if it.Hypervisor != types.InstanceTypeHypervisorNitro {
			why = append(why, "it is not a Nitro type")
		}
		if it.NetworkInfo == nil || !aws.ToBool(it.NetworkInfo.Ipv6Supported) {
			why = append(why, "it does not support IPv6")
		}
		if it.NetworkInfo == nil || aws.ToInt32(it.NetworkInfo.MaximumNetworkInterfaces) < 2 {
			why = append(why, "it supports fewer than two network interfaces")
		}
		a := ""
		if it.ProcessorInfo != nil {
			for _, sa := range it.ProcessorInfo.SupportedArchitectures {
				switch sa {
				case types.ArchitectureTypeArm64:
					a = "arm64"
				case types.ArchitectureTypeX8664:
					if a == "" {
						a = "amd64"
					}
				}
			}
		}
		if a == "" {
			why = append(why, "it is neither arm64 nor x86_64")
		}
		if len(why) > 0 {
			return "", fmt.Errorf("%w: %s: instance type %s cannot run Podmin: %s: choose a Nitro type with IPv6 and at least two network interfaces, such as t4g.small", ErrIncompatible, what, typ, strings.Join(why, "; "))
		}
		arch[typ] = a
		return a, nil
	}
	for i := range c.NodeGroups {
		ng := &c.NodeGroups[i]
		a, err := check(ng.InstanceType, "--nodegroup "+ng.Name)
		if err != nil {
			return err
		}
		ng.Arch = a
		if ng.NAT64 != "" {
			if _, err := check(ng.NAT64, "--nodegroup "+ng.Name+" nat64"); err != nil {
				return err
			}
		}
	}
	if c.NAT64 != "" {
		if _, err := check(c.NAT64, "--nat64"); err != nil {
			return err
		}
	}
	c.NAT64Arch = map[string]string{}
	for _, n := range c.NAT64Instances() {
		c.NAT64Arch[n.InstanceType] = arch[n.InstanceType]
	}
	for _, ng := range c.NodeGroups {
		if err := offered(ctx, api, ng.InstanceType, ng.Zone, "--nodegroup "+ng.Name); err != nil {
			return err
		}
	}
	for _, n := range c.NAT64Instances() {
		if err := offered(ctx, api, n.InstanceType, n.Zone, "NAT64 "+n.Name); err != nil {
			return err
		}
	}
	return nil
}

// offered requires the instance type to be offered in the zone. A zone
// left empty (not yet resolved) is not checked.
func offered(ctx context.Context, api EC2API, typ, zone, what string) error {
	if zone == "" {
		return nil
	}
	out, err := api.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: types.LocationTypeAvailabilityZone,
		Filters: []types.Filter{
			{Name: aws.String("location"), Values: []string{zone}},
			{Name: aws.String("instance-type"), Values: []string{typ}},
		}})
	if err != nil {
		return fmt.Errorf("check that %s is offered in %s: %w", typ, zone, err)
	}
	if len(out.InstanceTypeOfferings) == 0 {
		return fmt.Errorf("%w: %s: instance type %s is not offered in zone %s: choose another zone= or instance-type=", ErrIncompatible, what, typ, zone)
	}
	return nil
}

// ResolveAMIs pins the latest official Debian 13 AMI of each architecture
// the NodeGroups and NAT64 instances need.
func ResolveAMIs(ctx context.Context, api EC2API, c Cluster) (map[string]string, error) {
	need := map[string]bool{}
	for _, ng := range c.NodeGroups {
		need[ng.Arch] = true
	}
	for _, a := range c.NAT64Arch {
		need[a] = true
	}
	out := map[string]string{}
	for _, a := range []string{"amd64", "arm64"} {
		if !need[a] {
			continue
		}
		ec2Arch := "x86_64"
		if a == "arm64" {
			ec2Arch = "arm64"
		}
		res, err := api.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{DebianOwner}, Filters: []types.Filter{
			{Name: aws.String("name"), Values: []string{"debian-13-" + a + "-*"}},
			{Name: aws.String("architecture"), Values: []string{ec2Arch}},
			{Name: aws.String("state"), Values: []string{"available"}},
			{Name: aws.String("virtualization-type"), Values: []string{"hvm"}},
			{Name: aws.String("root-device-type"), Values: []string{"ebs"}},
		}})
		if err != nil {
			return nil, fmt.Errorf("find the Debian 13 %s AMI: %w", a, err)
		}
		var best types.Image
		for _, img := range res.Images {
			if img.Architecture != types.ArchitectureValues(ec2Arch) || img.State != types.ImageStateAvailable ||
				!strings.HasPrefix(aws.ToString(img.Name), "debian-13-"+a+"-") || strings.Contains(aws.ToString(img.Name), "daily") {
				continue
			}
			if best.ImageId == nil || aws.ToString(img.CreationDate) > aws.ToString(best.CreationDate) {
				best = img
			}
		}
		if best.ImageId == nil {
			return nil, fmt.Errorf("%w: no official Debian 13 %s AMI (owner %s) is available in %s", ErrIncompatible, a, DebianOwner, c.Region)
		}
		out[a] = *best.ImageId
	}
	return out, nil
}

// VPCChoice is the VPC setup uses.
type VPCChoice struct {
	// ID is the matching VPC, empty when none exists yet.
	ID string
	// Reuse is true for an untagged VPC Podmin uses but never deletes;
	// false when the cluster's own state creates or already manages it.
	Reuse bool
}

// SelectVPC finds the VPCs whose primary IPv4 CIDR equals the cluster's:
// none means create one; one carrying this cluster's create nonce (from
// prev, the variables the last setup published; zero before the first) is
// the cluster's own; one untagged compatible VPC is reused; anything else
// fails, listing every change it needs, before OpenTofu/Terraform runs. In
// a reused VPC the subnets carrying this cluster's tag and create nonce
// are what an earlier apply created, so they never count as taken.
func SelectVPC(ctx context.Context, api EC2API, c Cluster, prev Vars) (VPCChoice, error) {
	proof := prev.CreateNonce
	out, err := api.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{
		{Name: aws.String("cidr"), Values: []string{c.VPCCIDR}},
	}})
	if err != nil {
		return VPCChoice{}, fmt.Errorf("list the VPCs with CIDR %s: %w", c.VPCCIDR, err)
	}
	var vpcs []types.Vpc
	for _, v := range out.Vpcs {
		if aws.ToString(v.CidrBlock) == c.VPCCIDR { // the primary CIDR, exactly
			vpcs = append(vpcs, v)
		}
	}
	switch len(vpcs) {
	case 0:
		return VPCChoice{}, nil
	case 1:
	default:
		ids := make([]string, len(vpcs))
		for i, v := range vpcs {
			ids[i] = aws.ToString(v.VpcId)
		}
		sort.Strings(ids)
		return VPCChoice{}, fmt.Errorf("%w: %d VPCs have the primary CIDR %s (%s): Podmin cannot tell which to use: pass another --vpc-cidr or remove the extra VPCs", ErrIncompatible, len(vpcs), c.VPCCIDR, strings.Join(ids, ", "))
	}
	v := vpcs[0]
	id := aws.ToString(v.VpcId)
	if owner, ok := tagValue(v.Tags, ClusterTag); ok {
		if owner != c.ID {
			return VPCChoice{}, fmt.Errorf("%w: VPC %s with CIDR %s belongs to cluster %s (tag %s=%s): pass another --vpc-cidr", ErrIncompatible, id, c.VPCCIDR, owner, ClusterTag, owner)
		}
		if nonce, _ := tagValue(v.Tags, NonceTag); !contexts.ProvenBy(proof, nonce) {
			return VPCChoice{}, fmt.Errorf("%w: VPC %s with CIDR %s is tagged %s=%s but does not carry this cluster's %s, so its setup did not create it: remove its podmin: tags to let setup reuse it, or pass another --vpc-cidr", ErrIncompatible, id, c.VPCCIDR, ClusterTag, owner, NonceTag)
		}
		return VPCChoice{ID: id}, nil
	}
	var changes []string
	for _, attr := range []types.VpcAttributeName{types.VpcAttributeNameEnableDnsSupport, types.VpcAttributeNameEnableDnsHostnames} {
		a, err := api.DescribeVpcAttribute(ctx, &ec2.DescribeVpcAttributeInput{VpcId: v.VpcId, Attribute: attr})
		if err != nil {
			return VPCChoice{}, fmt.Errorf("read %s of VPC %s: %w", attr, id, err)
		}
		on := a.EnableDnsSupport
		if attr == types.VpcAttributeNameEnableDnsHostnames {
			on = a.EnableDnsHostnames
		}
		if on == nil || !aws.ToBool(on.Value) {
			changes = append(changes, "turn on "+string(attr))
		}
	}
	var v6 netip.Prefix
	for _, a := range v.Ipv6CidrBlockAssociationSet {
		p, err := netip.ParsePrefix(aws.ToString(a.Ipv6CidrBlock))
		if err == nil && a.Ipv6CidrBlockState != nil && a.Ipv6CidrBlockState.State == types.VpcCidrBlockStateCodeAssociated &&
			aws.ToString(a.Ipv6Pool) == "Amazon" && p.Bits() == 56 {
			v6 = p
			break
		}
	}
	// The subnets an earlier apply created here for this cluster are its
	// own: the state manages them, so they never block the next setup.
	taken, err := vpcSubnets(ctx, api, id, func(tags []types.Tag) bool {
		owner, _ := tagValue(tags, ClusterTag)
		nonce, _ := tagValue(tags, NonceTag)
		return owner == c.ID && contexts.ProvenBy(proof, nonce)
	})
	if err != nil {
		return VPCChoice{}, err
	}
	if !v6.IsValid() {
		changes = append(changes, "associate an Amazon-provided IPv6 /56")
	} else {
		needed, err := neededSlash64s(c, prev, v6)
		if err != nil {
			return VPCChoice{}, err
		}
		for _, need := range needed {
			if by, ok := taken.v6[need.prefix]; ok {
				changes = append(changes, fmt.Sprintf("free the IPv6 /64 %s (used by %s; %s needs it)", need.prefix, by, need.what))
			}
		}
	}
	if nats := c.NAT64Instances(); len(nats) > 0 {
		// The NAT64 data ENIs carry EIPs, which need the VPC's internet
		// gateway, and private IPv4 addresses in their own /28s.
		igw, err := api.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{Filters: []types.Filter{
			{Name: aws.String("attachment.vpc-id"), Values: []string{id}},
		}})
		if err != nil {
			return VPCChoice{}, fmt.Errorf("list the internet gateways of VPC %s: %w", id, err)
		}
		if len(igw.InternetGateways) == 0 {
			changes = append(changes, "attach an internet gateway (the NAT64 instances' Elastic IPs need one)")
		}
		alloc, err := Allocate(c, prev)
		if err != nil {
			return VPCChoice{}, err
		}
		for _, n := range nats {
			data, err := nat64DataIPv4(c.VPCCIDR, alloc.NAT64[n.Name])
			if err != nil {
				return VPCChoice{}, err
			}
			for _, s := range taken.v4 {
				if s.prefix.Overlaps(data) {
					changes = append(changes, fmt.Sprintf("free the IPv4 range %s (subnet %s has %s; NAT64 %s's data subnet needs it)", data, s.id, s.prefix, n.Name))
				}
			}
		}
	}
	if len(changes) > 0 {
		return VPCChoice{}, fmt.Errorf("%w: VPC %s has the primary CIDR %s but cannot be reused until you: %s", ErrIncompatible, id, c.VPCCIDR, strings.Join(changes, "; "))
	}
	return VPCChoice{ID: id, Reuse: true}, nil
}

type slash64 struct {
	prefix netip.Prefix
	what   string
}

// neededSlash64s are the /64s the module assigns below v6 (see locals.tf).
func neededSlash64s(c Cluster, prev Vars, v6 netip.Prefix) ([]slash64, error) {
	alloc, err := Allocate(c, prev)
	if err != nil {
		return nil, err
	}
	var out []slash64
	for _, ng := range c.NodeGroups {
		out = append(out, slash64{sub64(v6, alloc.NodeGroups[ng.Name]), "NodeGroup " + ng.Name})
	}
	for _, n := range c.NAT64Instances() {
		i := alloc.NAT64[n.Name]
		out = append(out, slash64{sub64(v6, nat64DataNetnum+i), "NAT64 " + n.Name + " data subnet"},
			slash64{sub64(v6, nat64MgmtNetnum+i), "NAT64 " + n.Name + " management subnet"})
	}
	return out, nil
}

// sub64 is cidrsubnet(v6, 8, n) for a /56.
func sub64(v6 netip.Prefix, n int) netip.Prefix {
	b := v6.Masked().Addr().As16()
	b[7] = byte(n)
	return netip.PrefixFrom(netip.AddrFrom16(b), 64)
}

// subnets are the IPv6 /64s (to the subnet holding each) and IPv4 ranges
// of a VPC's subnets.
type subnets struct {
	v6 map[netip.Prefix]string
	v4 []subnetV4
}

type subnetV4 struct {
	prefix netip.Prefix
	id     string
}

// vpcSubnets lists the subnets of vpc, leaving out those whose tags own
// accepts.
func vpcSubnets(ctx context.Context, api EC2API, vpc string, own func([]types.Tag) bool) (subnets, error) {
	out := subnets{v6: map[netip.Prefix]string{}}
	in := &ec2.DescribeSubnetsInput{Filters: []types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpc}}}}
	for page := 0; page < 1000; page++ {
		res, err := api.DescribeSubnets(ctx, in)
		if err != nil {
			return subnets{}, fmt.Errorf("list the subnets of VPC %s: %w", vpc, err)
		}
		for _, s := range res.Subnets {
			if own(s.Tags) {
				continue
			}
			id := aws.ToString(s.SubnetId)
			for _, a := range s.Ipv6CidrBlockAssociationSet {
				if p, err := netip.ParsePrefix(aws.ToString(a.Ipv6CidrBlock)); err == nil {
					out.v6[p.Masked()] = "subnet " + id
				}
			}
			if p, err := netip.ParsePrefix(aws.ToString(s.CidrBlock)); err == nil {
				out.v4 = append(out.v4, subnetV4{p.Masked(), id})
			}
		}
		if aws.ToString(res.NextToken) == "" {
			return out, nil
		}
		in.NextToken = res.NextToken
	}
	return subnets{}, fmt.Errorf("list the subnets of VPC %s: too many pages", vpc)
}

// nat64DataIPv4 is a NAT64 data subnet's IPv4 range: cidrsubnet(vpc_cidr,
// nat64_newbits, slot) as locals.tf computes it.
func nat64DataIPv4(vpcCIDR string, slot int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(vpcCIDR)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("VPC CIDR %q is not an IPv4 prefix", vpcCIDR)
	}
	bits := p.Bits() + min(4, 28-p.Bits())
	if slot < 0 || slot >= 1<<(bits-p.Bits()) {
		return netip.Prefix{}, fmt.Errorf("NAT64 slot %d is outside %s", slot, vpcCIDR)
	}
	a := p.Masked().Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n |= uint32(slot) << (32 - bits)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), bits), nil
}

func tagValue(tags []types.Tag, key string) (string, bool) {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value), true
		}
	}
	return "", false
}

// ErrNotOwned reports a resource destroy would delete that does not carry
// this cluster's tag.
var ErrNotOwned = errors.New("no proof of ownership")

// CheckOwnedVPC is destroy's check on a VPC its state created: it must
// still exist with this cluster's tag and the create nonce the published
// variables record (nonce), or destroy stops before deleting. A reused VPC
// is never in the state's resources, so never checked here.
func CheckOwnedVPC(ctx context.Context, api EC2API, id, cluster, nonce string) error {
	out, err := api.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{id}})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "InvalidVpcID.NotFound" {
		return nil // already gone: nothing to delete
	}
	if err != nil {
		return fmt.Errorf("%w: VPC %s cannot be described (%v): nothing was deleted", ErrNotOwned, id, err)
	}
	if len(out.Vpcs) == 0 {
		return nil
	}
	owner, ok := tagValue(out.Vpcs[0].Tags, ClusterTag)
	got, _ := tagValue(out.Vpcs[0].Tags, NonceTag)
	switch {
	case !ok:
		return fmt.Errorf("%w: VPC %s has no %s tag: Podmin deletes only what it created for this cluster; nothing was deleted", ErrNotOwned, id, ClusterTag)
	case owner != cluster:
		return fmt.Errorf("%w: VPC %s is tagged %s=%s, not %s: nothing was deleted", ErrNotOwned, id, ClusterTag, owner, cluster)
	case nonce == "":
		return fmt.Errorf("%w: the published variables record no create nonce, so Podmin cannot prove VPC %s is the one its setup created: nothing was deleted; run \"podmin setup\" once with the same flags (it records one and tags the cluster's resources), then destroy again", ErrNotOwned, id)
	case !contexts.ProvenBy(nonce, got):
		return fmt.Errorf("%w: VPC %s does not carry this cluster's %s, so Podmin cannot prove its setup created it: nothing was deleted", ErrNotOwned, id, NonceTag)
	}
	return nil
}

// CreatedVPC reads which VPC the state created from its outputs
// (vpc_created, vpc_id). Outputs it cannot read fail closed: destroy must
// know whether it deletes a VPC before it runs.
func CreatedVPC(outs map[string]json.RawMessage) (id string, created bool, err error) {
	rawCreated, ok1 := outs["vpc_created"]
	rawID, ok2 := outs["vpc_id"]
	if !ok1 || !ok2 {
		return "", false, fmt.Errorf("%w: the OpenTofu/Terraform state has no vpc_created or vpc_id output, so Podmin cannot tell which VPC it would delete: nothing was deleted", ErrNotOwned)
	}
	if err := json.Unmarshal(rawCreated, &created); err != nil {
		return "", false, fmt.Errorf("%w: the state's vpc_created output %s is not a boolean (%v): nothing was deleted", ErrNotOwned, rawCreated, err)
	}
	if err := json.Unmarshal(rawID, &id); err != nil {
		return "", false, fmt.Errorf("%w: the state's vpc_id output %s is not a string (%v): nothing was deleted", ErrNotOwned, rawID, err)
	}
	if created && id == "" {
		return "", false, fmt.Errorf("%w: the state says it created a VPC but names none: nothing was deleted", ErrNotOwned)
	}
	return id, created, nil
}
