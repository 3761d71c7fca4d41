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
	"reflect"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/infra/ec2test"
)

func prepared() Cluster {
	return Cluster{ID: "demo", Provider: "aws", Region: "us-west-2", Bucket: "demo-state", VPCCIDR: "10.0.0.0/16",
		NodeGroups: []NodeGroup{{Name: "default", Size: 1, DiskSize: 20, InstanceType: "t4g.small"}}}
}

func TestResolveZones(t *testing.T) {
	f := ec2test.New()
	api := f.Client(t)
	c := prepared()
	c.NodeGroups = append(c.NodeGroups, NodeGroup{Name: "workers", InstanceType: "c8g.large", Zone: "us-west-2c"})
	if err := ResolveZones(context.Background(), api, &c); err != nil {
		t.Fatal(err)
	}
	if c.NodeGroups[0].Zone != "us-west-2a" || c.NodeGroups[1].Zone != "us-west-2c" {
		t.Fatalf("zones %+v", c.NodeGroups)
	}
	for _, z := range []string{"us-west-2d", "us-west-2z"} {
		c := prepared()
		c.NodeGroups[0].Zone = z
		err := ResolveZones(context.Background(), api, &c)
		want := "incompatible with the requested setup: --nodegroup default: zone " + z + " is not an available zone of us-west-2: use one of us-west-2a, us-west-2b, us-west-2c"
		if !errors.Is(err, ErrIncompatible) || err.Error() != want {
			t.Errorf("zone %s: %v", z, err)
		}
	}
}

func TestResolveInstanceTypes(t *testing.T) {
	api := ec2test.New().Client(t)
	c := prepared()
	c.NAT64 = "t4g.nano"
	c.NodeGroups = []NodeGroup{{Name: "arm", InstanceType: "c8g.large", Zone: "us-west-2a"},
		{Name: "intel", InstanceType: "m7i.large", Zone: "us-west-2a", NAT64: "t4g.small"}}
	if err := ResolveInstanceTypes(context.Background(), api, &c); err != nil {
		t.Fatal(err)
	}
	if c.NodeGroups[0].Arch != "arm64" || c.NodeGroups[1].Arch != "amd64" ||
		!reflect.DeepEqual(c.NAT64Arch, map[string]string{"t4g.nano": "arm64", "t4g.small": "arm64"}) {
		t.Fatalf("architectures %+v %v", c.NodeGroups, c.NAT64Arch)
	}
	// A type not offered in the NodeGroup's zone.
	f := ec2test.New()
	f.NotOffered = map[string]bool{"us-west-2b/c8g.large": true}
	c = prepared()
	c.NodeGroups[0].InstanceType, c.NodeGroups[0].Zone = "c8g.large", "us-west-2b"
	if err := ResolveInstanceTypes(context.Background(), f.Client(t), &c); !errors.Is(err, ErrIncompatible) ||
		err.Error() != "incompatible with the requested setup: --nodegroup default: instance type c8g.large is not offered in zone us-west-2b: choose another zone= or instance-type=" {
		t.Errorf("not offered: %v", err)
	}
	for _, tc := range []struct{ typ, nat, want string }{
		{"t2.micro", "", "--nodegroup default: instance type t2.micro cannot run Podmin: it is not a Nitro type: choose"},
		{"a1.medium", "", "--nodegroup default: instance type a1.medium cannot run Podmin: it does not support IPv6; it supports fewer than two network interfaces: choose"},
		{"x9.huge", "", "--nodegroup default: instance type x9.huge does not exist in us-west-2"},
		{"t4g.small", "t2.micro", "--nat64: instance type t2.micro cannot run Podmin: it is not a Nitro type"},
	} {
		c := prepared()
		c.NodeGroups[0].InstanceType, c.NAT64 = tc.typ, tc.nat
		err := ResolveInstanceTypes(context.Background(), api, &c)
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s/%s: %v, want %q", tc.typ, tc.nat, err, tc.want)
		}
	}
}

func TestResolveAMIs(t *testing.T) {
	f := ec2test.New()
	api := f.Client(t)
	c := prepared()
	c.NodeGroups = []NodeGroup{{Name: "a", Arch: "arm64"}, {Name: "b", Arch: "amd64"}}
	amis, err := ResolveAMIs(context.Background(), api, c)
	if err != nil {
		t.Fatal(err)
	}
	// The newest official release image; neither the daily build nor an
	// image of another owner.
	if want := map[string]string{"arm64": "ami-arm-new", "amd64": "ami-amd-new"}; !reflect.DeepEqual(amis, want) {
		t.Fatalf("AMIs %v, want %v", amis, want)
	}
	f.Images = f.Images[:3]
	if _, err := ResolveAMIs(context.Background(), api, c); !errors.Is(err, ErrIncompatible) ||
		err.Error() != "incompatible with the requested setup: no official Debian 13 amd64 AMI (owner 136693071363) is available in us-west-2" {
		t.Fatalf("no amd64 image: %v", err)
	}
}

func TestSelectVPC(t *testing.T) {
	compatible := ec2test.VPC{ID: "vpc-reuse", CIDR: "10.0.0.0/16", IPv6: "2600:1f14:abc:de00::/56", IPv6Pool: "Amazon", DNSSupport: true, DNSHostnames: true}
	other := func(mut func(*ec2test.VPC)) ec2test.VPC { v := compatible; mut(&v); return v }
	for _, tc := range []struct {
		name    string
		vpcs    []ec2test.VPC
		subnets []ec2test.Subnet
		want    VPCChoice
		err     string
	}{
		{"none: create", []ec2test.VPC{{ID: "vpc-x", CIDR: "10.1.0.0/16"}}, nil, VPCChoice{}, ""},
		{"ours", []ec2test.VPC{other(func(v *ec2test.VPC) { v.Tags = map[string]string{"podmin:cluster": "demo", NonceTag: testNonce} })}, nil, VPCChoice{ID: "vpc-reuse"}, ""},
		{"forged tag", []ec2test.VPC{other(func(v *ec2test.VPC) { v.Tags = map[string]string{"podmin:cluster": "demo"} })}, nil, VPCChoice{},
			"VPC vpc-reuse with CIDR 10.0.0.0/16 is tagged podmin:cluster=demo but does not carry this cluster's podmin:create-nonce, so its setup did not create it"},
		{"copied tags, other nonce", []ec2test.VPC{other(func(v *ec2test.VPC) {
			v.Tags = map[string]string{"podmin:cluster": "demo", NonceTag: strings.Repeat("0", 64)}
		})}, nil, VPCChoice{}, "does not carry this cluster's podmin:create-nonce"},
		{"compatible untagged", []ec2test.VPC{compatible}, []ec2test.Subnet{{ID: "subnet-1", VPC: "vpc-reuse", IPv6: "2600:1f14:abc:def0::/64"}}, VPCChoice{ID: "vpc-reuse", Reuse: true}, ""},
		{"another cluster", []ec2test.VPC{other(func(v *ec2test.VPC) { v.Tags = map[string]string{"podmin:cluster": "prod"} })}, nil, VPCChoice{},
			"VPC vpc-reuse with CIDR 10.0.0.0/16 belongs to cluster prod (tag podmin:cluster=prod): pass another --vpc-cidr"},
		{"many", []ec2test.VPC{compatible, other(func(v *ec2test.VPC) { v.ID = "vpc-second" })}, nil, VPCChoice{},
			"2 VPCs have the primary CIDR 10.0.0.0/16 (vpc-reuse, vpc-second): Podmin cannot tell which to use"},
		{"no dns", []ec2test.VPC{other(func(v *ec2test.VPC) { v.DNSSupport, v.DNSHostnames = false, false })}, nil, VPCChoice{},
			"VPC vpc-reuse has the primary CIDR 10.0.0.0/16 but cannot be reused until you: turn on enableDnsSupport; turn on enableDnsHostnames"},
		{"no hostnames", []ec2test.VPC{other(func(v *ec2test.VPC) { v.DNSHostnames = false })}, nil, VPCChoice{},
			"cannot be reused until you: turn on enableDnsHostnames"},
		{"no ipv6", []ec2test.VPC{other(func(v *ec2test.VPC) { v.IPv6 = "" })}, nil, VPCChoice{},
			"cannot be reused until you: associate an Amazon-provided IPv6 /56"},
		{"byoip ipv6", []ec2test.VPC{other(func(v *ec2test.VPC) { v.IPv6Pool = "ipv6pool-ec2-0123" })}, nil, VPCChoice{},
			"cannot be reused until you: associate an Amazon-provided IPv6 /56"},
		{"taken /64", []ec2test.VPC{compatible}, []ec2test.Subnet{{ID: "subnet-9", VPC: "vpc-reuse", IPv6: "placeholder"}}, VPCChoice{},
			"cannot be reused until you: free the IPv6 /64 %s (used by subnet subnet-9; NodeGroup default needs it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ec2test.New()
			f.VPCs, f.Subnets = tc.vpcs, tc.subnets
			c := prepared()
			want := tc.err
			if tc.name == "taken /64" {
				alloc, _ := Allocate(c, Vars{})
				p := sub64(netip.MustParsePrefix(compatible.IPv6), alloc.NodeGroups["default"])
				f.Subnets[0].IPv6 = p.String()
				want = strings.Replace(want, "%s", p.String(), 1)
			}
			got, err := SelectVPC(context.Background(), f.Client(t), c, Vars{CreateNonce: testNonce})
			if want == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want %q", err, want)
			}
		})
	}
}

func TestSub64MatchesCidrsubnet(t *testing.T) {
	// cidrsubnet("2600:1f14:abc:de00::/56", 8, 172) = 2600:1f14:abc:deac::/64
	if got := sub64(netip.MustParsePrefix("2600:1f14:abc:de00::/56"), 172).String(); got != "2600:1f14:abc:deac::/64" {
		t.Fatal(got)
	}
}

// otherNonce is a well-formed create nonce of another setup.
const otherNonce = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"

func TestCheckOwnedVPC(t *testing.T) {
	f := ec2test.New()
	f.VPCs = []ec2test.VPC{
		{ID: "vpc-ours", CIDR: "10.0.0.0/16", Tags: map[string]string{"podmin:cluster": "demo", NonceTag: testNonce}},
		{ID: "vpc-forged", CIDR: "10.3.0.0/16", Tags: map[string]string{"podmin:cluster": "demo"}},
		// Another setup of a cluster with the same name (or tags copied
		// from one) carries a well-formed nonce that is not this one.
		{ID: "vpc-other-setup", CIDR: "10.4.0.0/16", Tags: map[string]string{"podmin:cluster": "demo", NonceTag: otherNonce}},
		{ID: "vpc-malformed", CIDR: "10.5.0.0/16", Tags: map[string]string{"podmin:cluster": "demo", NonceTag: "not-a-nonce"}},
		{ID: "vpc-untagged", CIDR: "10.1.0.0/16"},
		{ID: "vpc-prod", CIDR: "10.2.0.0/16", Tags: map[string]string{"podmin:cluster": "prod", "Name": "prod"}},
	}
	api := f.Client(t)
	ctx := context.Background()
	if err := CheckOwnedVPC(ctx, api, "vpc-ours", "demo", testNonce); err != nil {
		t.Fatal(err)
	}
	if err := CheckOwnedVPC(ctx, api, "vpc-gone", "demo", testNonce); err != nil {
		t.Fatalf("a VPC that is already gone: %v", err)
	}
	for _, tc := range []struct{ id, nonce, want string }{
		{"vpc-untagged", testNonce, "no proof of ownership: VPC vpc-untagged has no podmin:cluster tag: Podmin deletes only what it created for this cluster; nothing was deleted"},
		{"vpc-prod", testNonce, "no proof of ownership: VPC vpc-prod is tagged podmin:cluster=prod, not demo: nothing was deleted"},
		{"vpc-forged", testNonce, "no proof of ownership: VPC vpc-forged does not carry this cluster's podmin:create-nonce, so Podmin cannot prove its setup created it: nothing was deleted"},
		{"vpc-ours", "", "no proof of ownership: the published variables record no create nonce, so Podmin cannot prove VPC vpc-ours is the one its setup created"},
		{"vpc-other-setup", testNonce, "no proof of ownership: VPC vpc-other-setup does not carry this cluster's podmin:create-nonce"},
		{"vpc-malformed", testNonce, "no proof of ownership: VPC vpc-malformed does not carry this cluster's podmin:create-nonce"},
		// Only the nonce this destroy holds proves anything: a VPC another
		// setup created is refused even though it carries a valid nonce.
		{"vpc-ours", otherNonce, "no proof of ownership: VPC vpc-ours does not carry this cluster's podmin:create-nonce"},
		{"vpc-malformed", "not-a-nonce", "no proof of ownership: VPC vpc-malformed does not carry this cluster's podmin:create-nonce"},
	} {
		if err := CheckOwnedVPC(ctx, api, tc.id, "demo", tc.nonce); !errors.Is(err, ErrNotOwned) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.id, err)
		}
	}
}

// The state's outputs decide whether destroy deletes a VPC: outputs it
// cannot read fail closed.
func TestCreatedVPCFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		outs    map[string]string
		id      string
		created bool
		err     string
	}{
		{map[string]string{"vpc_created": "true", "vpc_id": `"vpc-1"`}, "vpc-1", true, ""},
		{map[string]string{"vpc_created": "false", "vpc_id": `"vpc-reused"`}, "vpc-reused", false, ""},
		{map[string]string{"vpc_id": `"vpc-1"`}, "", false, "has no vpc_created or vpc_id output"},
		{map[string]string{"vpc_created": "true"}, "", false, "has no vpc_created or vpc_id output"},
		{map[string]string{"vpc_created": `"yes"`, "vpc_id": `"vpc-1"`}, "", false, "vpc_created output \"yes\" is not a boolean"},
		{map[string]string{"vpc_created": "true", "vpc_id": "7"}, "", false, "vpc_id output 7 is not a string"},
		{map[string]string{"vpc_created": "true", "vpc_id": `""`}, "", false, "says it created a VPC but names none"},
	} {
		outs := map[string]json.RawMessage{}
		for k, v := range tc.outs {
			outs[k] = json.RawMessage(v)
		}
		id, created, err := CreatedVPC(outs)
		if tc.err == "" {
			if err != nil || id != tc.id || created != tc.created {
				t.Errorf("%v: %q %v %v", tc.outs, id, created, err)
			}
			continue
		}
		if !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: %v, want %q", tc.outs, err, tc.err)
		}
	}
}

// A reused VPC serves NAT64 only with an internet gateway for the data
// ENIs' EIPs and free IPv4 ranges for their data subnets; both are
// checked, and every missing change listed, before OpenTofu/Terraform runs.
func TestSelectVPCForNAT64(t *testing.T) {
	c := prepared()
	c.NAT64 = "t4g.nano"
	c.NAT64Arch = map[string]string{"t4g.nano": "arm64"}
	c.NodeGroups[0].Zone = "us-west-2a"
	alloc, err := Allocate(c, Vars{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := nat64DataIPv4(c.VPCCIDR, alloc.NAT64["shared-us-west-2a"])
	if err != nil {
		t.Fatal(err)
	}
	vpc := ec2test.VPC{ID: "vpc-reuse", CIDR: "10.0.0.0/16", IPv6: "2600:1f14:abc:de00::/56", IPv6Pool: "Amazon", DNSSupport: true, DNSHostnames: true}
	inside := netip.PrefixFrom(data.Addr().Next(), 28).Masked() // a /28 inside the data subnet's range
	for _, tc := range []struct {
		name    string
		igw     bool
		subnets []ec2test.Subnet
		want    []string
	}{
		{"ready", true, []ec2test.Subnet{{ID: "subnet-apps", VPC: "vpc-reuse", CIDR: "10.0.255.0/24"}}, nil},
		{"no internet gateway", false, nil, []string{"attach an internet gateway (the NAT64 instances' Elastic IPs need one)"}},
		{"overlapping IPv4", true, []ec2test.Subnet{{ID: "subnet-apps", VPC: "vpc-reuse", CIDR: inside.String()}},
			[]string{fmt.Sprintf("free the IPv4 range %s (subnet subnet-apps has %s; NAT64 shared-us-west-2a's data subnet needs it)", data, inside)}},
		{"both", false, []ec2test.Subnet{{ID: "subnet-big", VPC: "vpc-reuse", CIDR: "10.0.0.0/16"}},
			[]string{"attach an internet gateway", fmt.Sprintf("free the IPv4 range %s (subnet subnet-big has 10.0.0.0/16", data)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ec2test.New()
			f.VPCs, f.Subnets = []ec2test.VPC{vpc}, tc.subnets
			if tc.igw {
				f.InternetGateways = []ec2test.InternetGateway{{ID: "igw-1", VPC: "vpc-reuse"}}
			}
			f.InternetGateways = append(f.InternetGateways, ec2test.InternetGateway{ID: "igw-other", VPC: "vpc-other"})
			got, err := SelectVPC(context.Background(), f.Client(t), c, Vars{})
			if tc.want == nil {
				if err != nil || got != (VPCChoice{ID: "vpc-reuse", Reuse: true}) {
					t.Fatalf("got %+v, %v", got, err)
				}
				return
			}
			if !errors.Is(err, ErrIncompatible) {
				t.Fatalf("error %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// Without NAT64 neither is needed.
	f := ec2test.New()
	f.VPCs, f.Subnets = []ec2test.VPC{vpc}, []ec2test.Subnet{{ID: "subnet-big", VPC: "vpc-reuse", CIDR: "10.0.0.0/16"}}
	if got, err := SelectVPC(context.Background(), f.Client(t), prepared(), Vars{}); err != nil || !got.Reuse {
		t.Fatalf("without NAT64: %+v %v", got, err)
	}
	if slices.Contains(f.Calls, "DescribeInternetGateways") {
		t.Error("the internet gateway was checked without NAT64")
	}
}

// nat64DataIPv4 matches the module's cidrsubnet(vpc_cidr, nat64_newbits, slot).
func TestNAT64DataIPv4MatchesCidrsubnet(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		slot int
		want string
	}{
		{"10.0.0.0/16", 1, "10.0.16.0/20"},
		{"10.0.0.0/16", 8, "10.0.128.0/20"},
		{"10.0.0.0/16", 15, "10.0.240.0/20"},
		{"192.168.4.0/24", 3, "192.168.4.48/28"},
		{"172.16.0.0/26", 1, "172.16.0.16/28"},
	} {
		got, err := nat64DataIPv4(tc.cidr, tc.slot)
		if err != nil || got.String() != tc.want {
			t.Errorf("nat64DataIPv4(%s, %d) = %v %v, want %s", tc.cidr, tc.slot, got, err, tc.want)
		}
	}
	if _, err := nat64DataIPv4("10.0.0.0/16", 16); err == nil {
		t.Error("a slot outside the VPC was accepted")
	}
}
