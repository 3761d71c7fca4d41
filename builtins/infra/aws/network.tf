# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# The VPC: created and owned when no VPC has the requested primary CIDR,
# otherwise the one compatible untagged VPC, which is read and never managed.

resource "aws_vpc" "cluster" {
  count                            = local.create_vpc ? 1 : 0
  cidr_block                       = var.vpc_cidr
  assign_generated_ipv6_cidr_block = true
  enable_dns_support               = true
  enable_dns_hostnames             = true
  tags                             = merge(local.tags, { Name = "podmin-${var.cluster}" })
}

data "aws_vpc" "reused" {
  count = local.create_vpc ? 0 : 1
  id    = var.existing_vpc_id
}

resource "aws_egress_only_internet_gateway" "cluster" {
  vpc_id = local.vpc_id
  tags   = local.tags
}

# NAT64 data ENIs carry an EIP and need an internet gateway. A created VPC
# gets its own; a reused VPC must already have one attached.
resource "aws_internet_gateway" "cluster" {
  count  = local.create_vpc && length(var.nat64) > 0 ? 1 : 0
  vpc_id = local.vpc_id
  tags   = local.tags
}

data "aws_internet_gateway" "reused" {
  count = !local.create_vpc && length(var.nat64) > 0 ? 1 : 0
  filter {
    name   = "attachment.vpc-id"
    values = [var.existing_vpc_id]
  }
}

locals {
  internet_gateway_id = length(var.nat64) == 0 ? "" : (
    local.create_vpc ? aws_internet_gateway.cluster[0].id : data.aws_internet_gateway.reused[0].id
  )
}

# One IPv6-native /64 per NodeGroup: VMs have no IPv4 address.
resource "aws_subnet" "nodegroup" {
  for_each                                       = var.nodegroups
  vpc_id                                         = local.vpc_id
  availability_zone                              = each.value.zone
  ipv6_native                                    = true
  ipv6_cidr_block                                = cidrsubnet(local.vpc_ipv6, 8, each.value.subnet_index)
  assign_ipv6_address_on_creation                = true
  enable_dns64                                   = length(var.nat64) > 0
  enable_resource_name_dns_aaaa_record_on_launch = true
  tags                                           = merge(local.tags, { "podmin:nodegroup" = each.key })
}

resource "aws_route_table" "nodegroup" {
  for_each = var.nodegroups
  vpc_id   = local.vpc_id
  tags     = merge(local.tags, { "podmin:nodegroup" = each.key })
}

resource "aws_route" "nodegroup_ipv6_default" {
  for_each                    = var.nodegroups
  route_table_id              = aws_route_table.nodegroup[each.key].id
  destination_ipv6_cidr_block = "::/0"
  egress_only_gateway_id      = aws_egress_only_internet_gateway.cluster.id
}

# 64:ff9b::/96 targets the stable data ENI of the NodeGroup's NAT64 instance.
resource "aws_route" "nodegroup_nat64" {
  for_each                    = local.nodegroup_nat64
  route_table_id              = aws_route_table.nodegroup[each.key].id
  destination_ipv6_cidr_block = "64:ff9b::/96"
  network_interface_id        = aws_network_interface.nat64_data[each.value].id
}

resource "aws_route_table_association" "nodegroup" {
  for_each       = var.nodegroups
  subnet_id      = aws_subnet.nodegroup[each.key].id
  route_table_id = aws_route_table.nodegroup[each.key].id
}

# The S3 gateway endpoint admits only the cluster bucket, the regional SSM
# Agent package path and the exact external objects nodes read or write.
# It is dual-stack, so the IPv6 traffic of the IPv6-only nodes takes it
# (and its policy) too.
resource "aws_vpc_endpoint" "s3" {
  vpc_id            = local.vpc_id
  service_name      = "com.amazonaws.${var.region}.s3"
  vpc_endpoint_type = "Gateway"
  ip_address_type   = "dualstack"
  route_table_ids = concat(
    [for k, rt in aws_route_table.nodegroup : rt.id],
    [for k, rt in aws_route_table.nat64 : rt.id],
  )
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = concat([
      {
        Sid       = "ClusterBucket"
        Effect    = "Allow"
        Principal = "*"
        Action    = ["s3:GetObject", "s3:PutObject", "s3:ListBucket", "s3:GetBucketLocation"]
        Resource  = ["arn:aws:s3:::${var.bucket}", "arn:aws:s3:::${var.bucket}/*"]
      },
      {
        Sid       = "SSMAgentPackage"
        Effect    = "Allow"
        Principal = "*"
        Action    = ["s3:GetObject"]
        Resource  = ["arn:aws:s3:::${local.ssm_agent_bucket}/latest/debian_*/*"]
      },
      ], var.workload_ca_publish == null ? [] : [
      {
        Sid       = "WorkloadCAPublish"
        Effect    = "Allow"
        Principal = "*"
        Action    = ["s3:GetObject", "s3:PutObject"]
        Resource  = ["arn:aws:s3:::${var.workload_ca_publish.bucket}/${var.workload_ca_publish.key}"]
      },
      ], local.otel_logs_ca == null ? [] : [
      {
        Sid       = "OtelLogsCA"
        Effect    = "Allow"
        Principal = "*"
        Action    = ["s3:GetObject"]
        Resource  = ["arn:aws:s3:::${local.otel_logs_ca[0]}/${local.otel_logs_ca[1]}"]
      },
    ])
  })
  tags = local.tags
}
