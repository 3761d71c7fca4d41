// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/infra/ec2test"
)

// appliedSubnets are the subnets the module creates for v in a VPC with
// the IPv6 /56 v6, tagged as locals.tf tags them with nonce.
func appliedSubnets(t *testing.T, v Vars, vpc string, v6 netip.Prefix, nonce string) []ec2test.Subnet {
	t.Helper()
	tags := func(k, val string) map[string]string {
		return map[string]string{ClusterTag: v.Cluster, NonceTag: nonce, k: val}
	}
	var out []ec2test.Subnet
	for name, ng := range v.NodeGroups {
		out = append(out, ec2test.Subnet{ID: "subnet-ng-" + name, VPC: vpc, IPv6: sub64(v6, ng.SubnetIndex).String(), Tags: tags("podmin:nodegroup", name)})
	}
	for name, n := range v.NAT64 {
		data, err := nat64DataIPv4(v.VPCCIDR, n.SubnetIndex)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out,
			ec2test.Subnet{ID: "subnet-data-" + name, VPC: vpc, CIDR: data.String(), IPv6: sub64(v6, nat64DataNetnum+n.SubnetIndex).String(), Tags: tags("podmin:nat64", name)},
			ec2test.Subnet{ID: "subnet-mgmt-" + name, VPC: vpc, IPv6: sub64(v6, nat64MgmtNetnum+n.SubnetIndex).String(), Tags: tags("podmin:nat64", name)})
	}
	return out
}

// A second setup of a cluster on a reused VPC finds the subnets its first
// apply created there: they are the cluster's own (its tag and create
// nonce), not foreign ones, so adding a NodeGroup, resizing one or running
// a failed setup again works. A subnet whose tags were copied without the
// nonce, or that carries another cluster's nonce, still blocks reuse.
func TestSelectVPCAgainOnAReusedVPC(t *testing.T) {
	const vpcID = "vpc-reuse"
	v6 := netip.MustParsePrefix("2600:1f14:abc:de00::/56")
	c := renderCases()[1].cluster // shared NAT64, two NodeGroups in two zones
	f := ec2test.NewIn(c.Region)
	f.VPCs = []ec2test.VPC{{ID: vpcID, CIDR: c.VPCCIDR, IPv6: v6.String(), IPv6Pool: "Amazon", DNSSupport: true, DNSHostnames: true}}
	f.InternetGateways = []ec2test.InternetGateway{{ID: "igw-1", VPC: vpcID}}
	// The operator's own subnet, which setup must leave alone.
	f.Subnets = []ec2test.Subnet{{ID: "subnet-apps", VPC: vpcID, CIDR: "10.0.255.0/24", IPv6: sub64(v6, 191).String()}}
	api := f.Client(t)
	ctx := context.Background()

	first, err := SelectVPC(ctx, api, c, Vars{})
	if err != nil || first != (VPCChoice{ID: vpcID, Reuse: true}) {
		t.Fatalf("first setup: %+v, %v", first, err)
	}
	in := baseInputs("default", "workers")
	in.ExistingVPCID = vpcID
	applied, err := BuildVars(c, in)
	if err != nil {
		t.Fatal(err)
	}
	own := appliedSubnets(t, applied, vpcID, v6, testNonce)
	f.Subnets = append(f.Subnets, own...)

	// The same flags again, a resize, and a new NodeGroup.
	resized := c
	resized.NodeGroups = append([]NodeGroup(nil), c.NodeGroups...)
	resized.NodeGroups[0].Size = 4
	added := c
	added.NodeGroups = append(append([]NodeGroup(nil), c.NodeGroups...), ng("batch", "us-west-2c", "arm64", "t4g.small", 1))
	for name, cl := range map[string]Cluster{"unchanged": c, "resized": resized, "added": added} {
		got, err := SelectVPC(ctx, api, cl, applied)
		if err != nil || got != (VPCChoice{ID: vpcID, Reuse: true}) {
			t.Errorf("%s: second setup: %+v, %v", name, got, err)
		}
	}

	// Subnets at the cluster's places that do not prove they are its own.
	for _, tc := range []struct {
		name  string
		nonce string
	}{
		{"cluster tag without the nonce", ""},
		{"another setup's nonce", strings.Repeat("0", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.Subnets = f.Subnets[:1]
			for _, s := range appliedSubnets(t, applied, vpcID, v6, tc.nonce) {
				if tc.nonce == "" {
					delete(s.Tags, NonceTag)
				}
				f.Subnets = append(f.Subnets, s)
			}
			_, err := SelectVPC(ctx, api, c, applied)
			if !errors.Is(err, ErrIncompatible) {
				t.Fatalf("error %v, want ErrIncompatible", err)
			}
			for _, want := range []string{
				fmt.Sprintf("free the IPv6 /64 %s (used by subnet subnet-ng-default; NodeGroup default needs it)", sub64(v6, applied.NodeGroups["default"].SubnetIndex)),
				"(used by subnet subnet-data-shared-us-west-2a; NAT64 shared-us-west-2a data subnet needs it)",
				"(used by subnet subnet-mgmt-shared-us-west-2a; NAT64 shared-us-west-2a management subnet needs it)",
				"(subnet subnet-data-shared-us-west-2a has 10.0.",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}
