# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# One launch template and one Auto Scaling Group per NodeGroup. Each VM has a
# primary ENI with its node IPv6 address and a secondary ENI with one
# ordinary IPv6 address; bootstrap delegates the /80 Pod prefix to it.

resource "aws_launch_template" "nodegroup" {
  for_each      = var.nodegroups
  name_prefix   = "podmin-${var.cluster}-${each.key}-"
  image_id      = var.amis[each.value.arch]
  instance_type = each.value.instance_type
  user_data     = each.value.user_data
  ebs_optimized = true

  iam_instance_profile {
    arn = aws_iam_instance_profile.node.arn
  }

  block_device_mappings {
    device_name = "/dev/xvda"
    ebs {
      volume_type           = "gp3"
      volume_size           = each.value.disk_size
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
    subnet_id                   = aws_subnet.nodegroup[each.key].id
    security_groups             = [aws_security_group.nodes.id]
    ipv6_address_count          = 1
    associate_public_ip_address = false
    delete_on_termination       = true
  }

  network_interfaces {
    device_index          = 1
    subnet_id             = aws_subnet.nodegroup[each.key].id
    security_groups       = [aws_security_group.nodes.id]
    ipv6_address_count    = 1
    delete_on_termination = true
  }

  tag_specifications {
    resource_type = "instance"
    tags          = merge(local.tags, { "podmin:nodegroup" = each.key, Name = "podmin-${var.cluster}-${each.key}" })
  }

  tag_specifications {
    resource_type = "network-interface"
    tags          = merge(local.tags, { "podmin:nodegroup" = each.key })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(local.tags, { "podmin:nodegroup" = each.key })
  }

  tags = merge(local.tags, { "podmin:nodegroup" = each.key })
}

resource "aws_autoscaling_group" "nodegroup" {
  for_each            = var.nodegroups
  name_prefix         = "podmin-${var.cluster}-${each.key}-"
  min_size            = each.value.size
  max_size            = each.value.size
  desired_capacity    = each.value.size
  vpc_zone_identifier = [aws_subnet.nodegroup[each.key].id]

  launch_template {
    id      = aws_launch_template.nodegroup[each.key].id
    version = aws_launch_template.nodegroup[each.key].latest_version
  }

  tag {
    key                 = "podmin:cluster"
    value               = var.cluster
    propagate_at_launch = false
  }

  tag {
    key                 = "podmin:nodegroup"
    value               = each.key
    propagate_at_launch = false
  }

  depends_on = [aws_route_table_association.nodegroup, aws_vpc_endpoint.s3]
}
