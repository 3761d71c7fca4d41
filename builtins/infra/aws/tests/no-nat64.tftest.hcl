# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# The plan of testdata/no-nat64.tfvars.json: one NodeGroup in a created
# VPC, no NAT64. Run with that file as podmin.auto.tfvars.json.

mock_provider "aws" {
  source = "./tests/mocks"
}

run "no_nat64" {
  command = apply

  assert {
    condition     = length(aws_vpc.cluster) == 1 && aws_vpc.cluster[0].cidr_block == "10.0.0.0/16" && aws_vpc.cluster[0].assign_generated_ipv6_cidr_block
    error_message = "the VPC is created with the requested CIDR and an Amazon-provided IPv6 /56"
  }
  assert {
    condition     = [for k in ["min_size", "max_size", "desired_capacity"] : aws_autoscaling_group.nodegroup["default"][k]] == [1, 1, 1]
    error_message = "NodeGroup default is an Auto Scaling Group of exactly one VM"
  }
  assert {
    condition     = aws_subnet.nodegroup["default"].ipv6_cidr_block == "2600:1f14:abc:de1e::/64" && aws_subnet.nodegroup["default"].ipv6_native && aws_subnet.nodegroup["default"].availability_zone == "us-west-2a"
    error_message = "NodeGroup default's IPv6-native /64 is netnum 30 of the VPC's /56: ${aws_subnet.nodegroup["default"].ipv6_cidr_block}"
  }
  assert {
    condition     = !aws_subnet.nodegroup["default"].enable_dns64 && length(aws_route.nodegroup_nat64) == 0 && length(aws_autoscaling_group.nat64) == 0
    error_message = "without NAT64 there is no DNS64, no 64:ff9b::/96 route and no NAT64 instance"
  }
  assert {
    condition     = [for b in aws_launch_template.nodegroup["default"].block_device_mappings : [b.ebs[0].volume_type, b.ebs[0].volume_size, b.ebs[0].encrypted]] == [["gp3", 20, "true"]]
    error_message = "the root volume is an encrypted 20 GiB GP3 volume"
  }
  assert {
    condition = [for n in aws_launch_template.nodegroup["default"].network_interfaces : [n.device_index, n.ipv6_address_count, n.subnet_id]] == [
      [0, 1, aws_subnet.nodegroup["default"].id], [1, 1, aws_subnet.nodegroup["default"].id],
    ]
    error_message = "every VM has a primary and a secondary ENI, each with one IPv6 address in its NodeGroup subnet"
  }
  assert {
    condition     = aws_launch_template.nodegroup["default"].image_id == "ami-0arm64debian13" && aws_launch_template.nodegroup["default"].instance_type == "t4g.small"
    error_message = "the NodeGroup boots the pinned arm64 AMI on t4g.small"
  }
  assert {
    condition     = aws_vpc_endpoint.s3.ip_address_type == "dualstack" && aws_vpc_endpoint.s3.vpc_endpoint_type == "Gateway"
    error_message = "the S3 gateway endpoint carries IPv6 traffic too"
  }
  assert {
    condition     = [for s in jsondecode(aws_vpc_endpoint.s3.policy).Statement : s.Sid] == ["ClusterBucket", "SSMAgentPackage"]
    error_message = "the S3 endpoint admits only the cluster bucket and the SSM Agent package"
  }
  assert {
    condition = toset(flatten([for s in jsondecode(aws_iam_role_policy.node.policy).Statement : s.Action])) == toset([
      "s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListBucket", "ssm:GetParameter", "secretsmanager:GetSecretValue", "ec2:AssignIpv6Addresses",
    ])
    error_message = "the node role grants exactly the calls nodes make"
  }
  assert {
    condition = one([for s in jsondecode(aws_iam_role_policy.node.policy).Statement : s.Resource if s.Sid == "PodPrefix"]) == [
      "arn:aws:ec2:us-west-2:123456789012:network-interface/*",
    ] && one([for s in jsondecode(aws_iam_role_policy.node.policy).Statement : s.Condition if s.Sid == "PodPrefix"]) == { StringEquals = { "aws:ResourceTag/podmin:cluster" = "demo" } }
    error_message = "nodes delegate Pod prefixes only on this cluster's ENIs"
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.node.policy).Statement : s.Resource if s.Sid == "ClusterSecrets"]) == ["arn:aws:secretsmanager:us-west-2:123456789012:secret:/demo/*"]
    error_message = "nodes read only this cluster's Secrets Manager secrets"
  }
  assert {
    condition = aws_vpc.cluster[0].tags == tomap({
      "podmin:cluster"      = "demo"
      "podmin:create-nonce" = "5e1f0c2d9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"
      Name                  = "podmin-demo"
    }) && aws_subnet.nodegroup["default"].tags["podmin:create-nonce"] == "5e1f0c2d9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"
    error_message = "every resource carries the cluster's create nonce, the proof destroy requires"
  }
  assert {
    condition     = alltrue([for s in aws_launch_template.nodegroup["default"].tag_specifications : s.tags["podmin:create-nonce"] == var.create_nonce])
    error_message = "instances, ENIs and volumes carry the create nonce too"
  }
  assert {
    condition     = length(aws_iam_role.nat64) == 0
    error_message = "no NAT64 role without NAT64"
  }
}
