# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# Each NAT64 instance is a size-one Auto Scaling Group. The instance boots
# with a disposable IPv6-only management ENI; the stable data ENI (private
# IPv4, IPv6 and an EIP) outlives instances and is what NodeGroups route
# 64:ff9b::/96 to. Every setup changes the launch generation, so the
# instance refresh launches a replacement before terminating the old one.

resource "aws_subnet" "nat64_management" {
  for_each                        = var.nat64
  vpc_id                          = local.vpc_id
  availability_zone               = each.value.zone
  ipv6_native                     = true
  ipv6_cidr_block                 = cidrsubnet(local.vpc_ipv6, 8, local.nat64_mgmt_netnum + each.value.subnet_index)
  assign_ipv6_address_on_creation = true
  tags                            = merge(local.tags, { "podmin:nat64" = each.key })
}

resource "aws_subnet" "nat64_data" {
  for_each                        = var.nat64
  vpc_id                          = local.vpc_id
  availability_zone               = each.value.zone
  cidr_block                      = cidrsubnet(var.vpc_cidr, local.nat64_newbits, each.value.subnet_index)
  ipv6_cidr_block                 = cidrsubnet(local.vpc_ipv6, 8, local.nat64_data_netnum + each.value.subnet_index)
  map_public_ip_on_launch         = false
  assign_ipv6_address_on_creation = false
  tags                            = merge(local.tags, { "podmin:nat64" = each.key })
}

resource "aws_route_table" "nat64" {
  for_each = var.nat64
  vpc_id   = local.vpc_id
  tags     = merge(local.tags, { "podmin:nat64" = each.key })
}

resource "aws_route" "nat64_ipv4_default" {
  for_each               = var.nat64
  route_table_id         = aws_route_table.nat64[each.key].id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = local.internet_gateway_id
}

resource "aws_route" "nat64_ipv6_default" {
  for_each                    = var.nat64
  route_table_id              = aws_route_table.nat64[each.key].id
  destination_ipv6_cidr_block = "::/0"
  gateway_id                  = local.internet_gateway_id
}

resource "aws_route_table_association" "nat64_management" {
  for_each       = var.nat64
  subnet_id      = aws_subnet.nat64_management[each.key].id
  route_table_id = aws_route_table.nat64[each.key].id
}

resource "aws_route_table_association" "nat64_data" {
  for_each       = var.nat64
  subnet_id      = aws_subnet.nat64_data[each.key].id
  route_table_id = aws_route_table.nat64[each.key].id
}

resource "aws_network_interface" "nat64_data" {
  for_each           = var.nat64
  subnet_id          = aws_subnet.nat64_data[each.key].id
  security_groups    = [aws_security_group.nat64[each.key].id]
  ipv6_address_count = 1
  source_dest_check  = false
  description        = "Podmin ${var.cluster} NAT64 ${each.key} stable data ENI"
  tags               = merge(local.tags, { "podmin:nat64" = each.key, "podmin:nodegroup" = "nat64-${each.key}" })
}

resource "aws_eip" "nat64" {
  for_each          = var.nat64
  domain            = "vpc"
  network_interface = aws_network_interface.nat64_data[each.key].id
  tags              = merge(local.tags, { "podmin:nat64" = each.key })
}

resource "aws_launch_template" "nat64" {
  for_each      = var.nat64
  name_prefix   = "podmin-${var.cluster}-nat64-${each.key}-"
  image_id      = var.amis[each.value.arch]
  instance_type = each.value.instance_type
  user_data = base64encode(templatefile("${path.module}/nat64-user-data.sh.tftpl", {
    cluster        = var.cluster
    region         = var.region
    bucket         = var.bucket
    name           = each.key
    generation     = var.launch_generation
    data_eni       = aws_network_interface.nat64_data[each.key].id
    lifecycle_hook = "podmin-nat64-launch"
    jool_key       = try(var.jool_archives[each.value.arch].key, "")
    jool_sha256    = try(var.jool_archives[each.value.arch].sha256, "")
    workload_cidrs = [for ng, n in local.nodegroup_nat64 : aws_subnet.nodegroup[ng].ipv6_cidr_block if n == each.key]
  }))

  iam_instance_profile {
    arn = aws_iam_instance_profile.nat64[0].arn
  }

  block_device_mappings {
    device_name = "/dev/xvda"
    ebs {
      volume_type           = "gp3"
      volume_size           = 8
      encrypted             = true
      delete_on_termination = true
    }
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_protocol_ipv6          = "enabled"
    http_put_response_hop_limit = 1
    instance_metadata_tags      = "enabled"
  }

  network_interfaces {
    device_index                = 0
    subnet_id                   = aws_subnet.nat64_management[each.key].id
    security_groups             = [aws_security_group.nat64[each.key].id]
    ipv6_address_count          = 1
    associate_public_ip_address = false
    delete_on_termination       = true
  }

  tag_specifications {
    resource_type = "instance"
    tags          = merge(local.tags, { "podmin:nodegroup" = "nat64-${each.key}", "podmin:nat64-generation" = var.launch_generation })
  }

  tag_specifications {
    resource_type = "network-interface"
    tags          = merge(local.tags, { "podmin:nodegroup" = "nat64-${each.key}" })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(local.tags, { "podmin:nodegroup" = "nat64-${each.key}" })
  }

  tags = merge(local.tags, { "podmin:nat64" = each.key, "podmin:nat64-generation" = var.launch_generation })
}

resource "aws_autoscaling_group" "nat64" {
  for_each            = var.nat64
  name_prefix         = "podmin-${var.cluster}-nat64-${each.key}-"
  min_size            = 1
  max_size            = 2
  desired_capacity    = 1
  vpc_zone_identifier = [aws_subnet.nat64_management[each.key].id]

  launch_template {
    id      = aws_launch_template.nat64[each.key].id
    version = aws_launch_template.nat64[each.key].latest_version
  }

  initial_lifecycle_hook {
    name                 = "podmin-nat64-launch"
    lifecycle_transition = "autoscaling:EC2_INSTANCE_LAUNCHING"
    default_result       = "ABANDON"
    heartbeat_timeout    = 900
  }

  instance_refresh {
    strategy = "Rolling"
    preferences {
      min_healthy_percentage = 100
      max_healthy_percentage = 200
    }
    triggers = ["tag"]
  }

  tag {
    key                 = "podmin:cluster"
    value               = var.cluster
    propagate_at_launch = false
  }

  tag {
    key                 = "podmin:nodegroup"
    value               = "nat64-${each.key}"
    propagate_at_launch = false
  }

  tag {
    key                 = "podmin:nat64-generation"
    value               = var.launch_generation
    propagate_at_launch = false
  }
}
