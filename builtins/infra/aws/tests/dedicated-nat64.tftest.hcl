# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# The plan of testdata/dedicated-nat64.tfvars.json: NodeGroup workers has a
# dedicated NAT64 instance and a 100 GiB disk; the workload CA bundle is
# published to an external object and log export reads a private CA.

mock_provider "aws" {
  source = "./tests/mocks"
}

run "dedicated_nat64" {
  command = apply

  assert {
    condition     = keys(aws_autoscaling_group.nat64) == ["ng-workers", "shared-us-west-2a"]
    error_message = "one dedicated and one shared NAT64 instance"
  }
  assert {
    condition = { for k, r in aws_route.nodegroup_nat64 : k => r.network_interface_id } == {
      default = aws_network_interface.nat64_data["shared-us-west-2a"].id
      workers = aws_network_interface.nat64_data["ng-workers"].id
    }
    error_message = "workers route through their dedicated NAT64, default through its zone's shared one"
  }
  assert {
    condition     = aws_launch_template.nat64["ng-workers"].instance_type == "t4g.small" && aws_launch_template.nat64["shared-us-west-2a"].instance_type == "t4g.nano"
    error_message = "the dedicated NAT64 runs nat64=t4g.small, the shared one t4g.nano"
  }
  assert {
    condition     = aws_subnet.nat64_data["ng-workers"].cidr_block == "10.0.64.0/20" && aws_subnet.nat64_data["ng-workers"].ipv6_cidr_block == "2600:1f14:abc:dec4::/64"
    error_message = "the dedicated NAT64's data subnet is slot 4"
  }
  assert {
    condition     = one(aws_launch_template.nodegroup["workers"].block_device_mappings).ebs[0].volume_size == 100 && one(aws_launch_template.nodegroup["default"].block_device_mappings).ebs[0].volume_size == 20
    error_message = "disk-size is per NodeGroup"
  }
  assert {
    condition = { for s in jsondecode(aws_vpc_endpoint.s3.policy).Statement : s.Sid => s.Resource } == {
      ClusterBucket     = ["arn:aws:s3:::demo-state", "arn:aws:s3:::demo-state/*"]
      SSMAgentPackage   = ["arn:aws:s3:::amazon-ssm-us-west-2/latest/debian_*/*"]
      WorkloadCAPublish = ["arn:aws:s3:::trust-bucket/podmin/ca.pem"]
      OtelLogsCA        = ["arn:aws:s3:::trust-bucket/otel/ca.pem"]
    }
    error_message = "the S3 endpoint admits the bucket, the SSM Agent package and exactly the two external objects"
  }
  assert {
    condition = { for s in jsondecode(aws_iam_role_policy.node.policy).Statement : s.Sid => [s.Action, s.Resource] if contains(["WorkloadCAPublish", "OtelLogsCA"], s.Sid) } == {
      WorkloadCAPublish = [["s3:GetObject", "s3:PutObject"], ["arn:aws:s3:::trust-bucket/podmin/ca.pem"]]
      OtelLogsCA        = [["s3:GetObject"], ["arn:aws:s3:::trust-bucket/otel/ca.pem"]]
    }
    error_message = "nodes may write only the workload CA bundle object and read the log exporter's CA object"
  }
}
