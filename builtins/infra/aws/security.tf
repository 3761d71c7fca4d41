# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# Nodes admit only workload traffic between NodeGroup subnets and the
# agents' leader port; there is no SSH. Administration goes through SSM.

locals {
  nodegroup_ipv6_cidrs = [for k, s in aws_subnet.nodegroup : s.ipv6_cidr_block]
}

resource "aws_security_group" "nodes" {
  name_prefix = "podmin-${var.cluster}-nodes-"
  description = "Podmin ${var.cluster} nodes: workload traffic and the agent leader port"
  vpc_id      = local.vpc_id
  tags        = local.tags

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_ingress_rule" "workload" {
  for_each          = aws_subnet.nodegroup
  security_group_id = aws_security_group.nodes.id
  description       = "workload traffic from NodeGroup ${each.key}"
  ip_protocol       = "-1"
  cidr_ipv6         = each.value.ipv6_cidr_block
  tags              = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "leader" {
  for_each          = aws_subnet.nodegroup
  security_group_id = aws_security_group.nodes.id
  description       = "agent leader port from NodeGroup ${each.key}"
  ip_protocol       = "tcp"
  from_port         = var.agent_leader_port
  to_port           = var.agent_leader_port
  cidr_ipv6         = each.value.ipv6_cidr_block
  tags              = local.tags
}

resource "aws_vpc_security_group_egress_rule" "nodes_ipv6" {
  security_group_id = aws_security_group.nodes.id
  description       = "all IPv6 egress"
  ip_protocol       = "-1"
  cidr_ipv6         = "::/0"
  tags              = local.tags
}

# NAT64 admits translation only from the workload subnets assigned to it.
resource "aws_security_group" "nat64" {
  for_each    = var.nat64
  name_prefix = "podmin-${var.cluster}-nat64-${each.key}-"
  description = "Podmin ${var.cluster} NAT64 ${each.key}: assigned workload subnets only"
  vpc_id      = local.vpc_id
  tags        = merge(local.tags, { "podmin:nat64" = each.key })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_ingress_rule" "nat64" {
  for_each = {
    for pair in flatten([
      for ng, n in local.nodegroup_nat64 : { key = "${n}/${ng}", nat64 = n, nodegroup = ng }
    ]) : pair.key => pair
  }
  security_group_id = aws_security_group.nat64[each.value.nat64].id
  description       = "translation for NodeGroup ${each.value.nodegroup}"
  ip_protocol       = "-1"
  cidr_ipv6         = aws_subnet.nodegroup[each.value.nodegroup].ipv6_cidr_block
  tags              = local.tags
}

resource "aws_vpc_security_group_egress_rule" "nat64_ipv4" {
  for_each          = var.nat64
  security_group_id = aws_security_group.nat64[each.key].id
  description       = "translated IPv4 egress"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
  tags              = local.tags
}

resource "aws_vpc_security_group_egress_rule" "nat64_ipv6" {
  for_each          = var.nat64
  security_group_id = aws_security_group.nat64[each.key].id
  description       = "IPv6 egress for packages and the AWS APIs"
  ip_protocol       = "-1"
  cidr_ipv6         = "::/0"
  tags              = local.tags
}
