# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# The plan of testdata/reused-vpc.tfvars.json: a compatible untagged VPC is
# read, never managed.

mock_provider "aws" {
  source = "./tests/mocks"
}

run "reused_vpc" {
  command = apply

  assert {
    condition     = length(aws_vpc.cluster) == 0 && data.aws_vpc.reused[0].id == "vpc-0123456789abcdef0"
    error_message = "the reused VPC is only read"
  }
  assert {
    condition     = output.vpc_created == false && output.vpc_id == "vpc-0123456789abcdef0"
    error_message = "the outputs say the VPC was not created, so destroy never checks or deletes it"
  }
  assert {
    condition     = aws_subnet.nodegroup["default"].vpc_id == "vpc-0123456789abcdef0" && aws_subnet.nodegroup["default"].ipv6_cidr_block == "2600:1f14:abc:de1e::/64"
    error_message = "the NodeGroup subnet is carved from the reused VPC's /56"
  }
  assert {
    condition     = length(aws_internet_gateway.cluster) == 0 && aws_egress_only_internet_gateway.cluster.vpc_id == "vpc-0123456789abcdef0"
    error_message = "without NAT64 the reused VPC needs no internet gateway; the egress-only gateway is the cluster's own"
  }
}
