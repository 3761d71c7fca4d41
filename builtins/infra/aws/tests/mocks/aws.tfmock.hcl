# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# What the mocked AWS provider answers where the module computes from it:
# the Amazon-provided /56 of the VPC (created or reused), the partition and
# the account.

mock_resource "aws_vpc" {
  defaults = {
    ipv6_cidr_block = "2600:1f14:abc:de00::/56"
  }
}

mock_data "aws_vpc" {
  defaults = {
    ipv6_cidr_block = "2600:1f14:abc:de00::/56"
  }
}

mock_data "aws_partition" {
  defaults = {
    partition = "aws"
  }
}

mock_data "aws_caller_identity" {
  defaults = {
    account_id = "123456789012"
  }
}

mock_resource "aws_iam_instance_profile" {
  defaults = {
    arn = "arn:aws:iam::123456789012:instance-profile/podmin-demo-node"
  }
}

mock_resource "aws_launch_template" {
  defaults = {
    id             = "lt-0123456789abcdef0"
    latest_version = 1
  }
}
