# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

locals {
  # podmin:cluster names the cluster; podmin:create-nonce proves that this
  # cluster's setup created the resource.
  tags = {
    "podmin:cluster"      = var.cluster
    "podmin:create-nonce" = var.create_nonce
  }

  create_vpc = var.existing_vpc_id == ""
  vpc_id     = local.create_vpc ? aws_vpc.cluster[0].id : data.aws_vpc.reused[0].id
  vpc_ipv6   = local.create_vpc ? aws_vpc.cluster[0].ipv6_cidr_block : data.aws_vpc.reused[0].ipv6_cidr_block

  # The NodeGroups that route 64:ff9b::/96 through a NAT64 instance.
  nodegroup_nat64 = {
    for k, ng in var.nodegroups : k => ng.nat64 if ng.nat64 != ""
  }

  # The IPv6 /64 netnums below the VPC's /56: NodeGroups take 0-191, NAT64
  # data subnets 192-223, NAT64 management subnets 224-255.
  nat64_data_netnum = 192
  nat64_mgmt_netnum = 224

  # IPv4 subnets of the NAT64 data ENIs: the smallest of /28 and a sixteenth
  # of the VPC.
  nat64_newbits = min(4, 28 - tonumber(split("/", var.vpc_cidr)[1]))

  ssm_agent_bucket = "amazon-ssm-${var.region}"
}
