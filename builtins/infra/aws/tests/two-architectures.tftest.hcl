# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# The plan of testdata/two-architectures.tfvars.json: an arm64 and an amd64
# NodeGroup in one zone.

mock_provider "aws" {
  source = "./tests/mocks"
}

run "two_architectures" {
  command = apply

  assert {
    condition = { for k, t in aws_launch_template.nodegroup : k => [t.image_id, t.instance_type] } == {
      arm   = ["ami-0arm64debian13", "c8g.large"]
      intel = ["ami-0amd64debian13", "m7i.large"]
    }
    error_message = "each NodeGroup boots the AMI pinned for its architecture"
  }
  assert {
    condition     = { for k, g in aws_autoscaling_group.nodegroup : k => g.desired_capacity } == { arm = 2, intel = 2 }
    error_message = "both NodeGroups have two VMs"
  }
  assert {
    condition     = { for k, s in aws_subnet.nodegroup : k => s.ipv6_cidr_block } == { arm = "2600:1f14:abc:de75::/64", intel = "2600:1f14:abc:de77::/64" }
    error_message = "each NodeGroup has its own /64"
  }
  assert {
    condition     = length(aws_vpc_security_group_ingress_rule.workload) == 2 && length(aws_vpc_security_group_ingress_rule.leader) == 2
    error_message = "nodes admit workload and leader traffic from both NodeGroup subnets"
  }
}
