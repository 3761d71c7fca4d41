# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# The plan of testdata/shared-nat64.tfvars.json: two NodeGroups in two
# zones, each zone with its shared NAT64 instance.

mock_provider "aws" {
  source = "./tests/mocks"
}

run "shared_nat64" {
  command = apply

  assert {
    condition     = [for k in ["min_size", "max_size", "desired_capacity"] : aws_autoscaling_group.nodegroup["workers"][k]] == [3, 3, 3]
    error_message = "NodeGroup workers has three VMs"
  }
  assert {
    condition = { for k, s in aws_subnet.nodegroup : k => [s.ipv6_cidr_block, s.availability_zone, s.enable_dns64] } == {
      default = ["2600:1f14:abc:de1e::/64", "us-west-2a", true]
      workers = ["2600:1f14:abc:deac::/64", "us-west-2b", true]
    }
    error_message = "each NodeGroup has its /64 in its zone, with DNS64"
  }
  assert {
    condition = { for k, r in aws_route.nodegroup_nat64 : k => [r.route_table_id, r.destination_ipv6_cidr_block, r.network_interface_id] } == {
      default = [aws_route_table.nodegroup["default"].id, "64:ff9b::/96", aws_network_interface.nat64_data["shared-us-west-2a"].id]
      workers = [aws_route_table.nodegroup["workers"].id, "64:ff9b::/96", aws_network_interface.nat64_data["shared-us-west-2b"].id]
    }
    error_message = "each NodeGroup routes 64:ff9b::/96 to the stable data ENI of its zone's NAT64"
  }
  assert {
    condition = { for k, s in aws_subnet.nat64_data : k => [s.cidr_block, s.ipv6_cidr_block, s.availability_zone] } == {
      "shared-us-west-2a" = ["10.0.16.0/20", "2600:1f14:abc:dec1::/64", "us-west-2a"]
      "shared-us-west-2b" = ["10.0.128.0/20", "2600:1f14:abc:dec8::/64", "us-west-2b"]
    }
    error_message = "each NAT64 data subnet is its slot's IPv4 /20 and IPv6 /64"
  }
  assert {
    condition = { for k, s in aws_subnet.nat64_management : k => [s.ipv6_cidr_block, s.ipv6_native] } == {
      "shared-us-west-2a" = ["2600:1f14:abc:dee1::/64", true]
      "shared-us-west-2b" = ["2600:1f14:abc:dee8::/64", true]
    }
    error_message = "each NAT64 management subnet is IPv6-only"
  }
  assert {
    condition     = alltrue([for k, e in aws_network_interface.nat64_data : !e.source_dest_check && e.ipv6_address_count == 1 && e.subnet_id == aws_subnet.nat64_data[k].id])
    error_message = "the stable data ENI forwards (no source/destination check) and has one IPv6 address"
  }
  assert {
    condition     = alltrue([for k, e in aws_eip.nat64 : e.network_interface == aws_network_interface.nat64_data[k].id])
    error_message = "every stable data ENI carries an EIP"
  }
  assert {
    condition     = alltrue([for k, g in aws_autoscaling_group.nat64 : [g.min_size, g.max_size, g.desired_capacity] == [1, 2, 1]])
    error_message = "each NAT64 instance is a size-one group that can launch before it terminates"
  }
  assert {
    condition     = strcontains(base64decode(aws_launch_template.nat64["shared-us-west-2a"].user_data), "workload_subnets=('2600:1f14:abc:de1e::/64' )")
    error_message = "the shared NAT64 of us-west-2a serves exactly NodeGroup default's subnet"
  }
  assert {
    condition     = strcontains(base64decode(aws_launch_template.nat64["shared-us-west-2b"].user_data), "ip -6 route replace \"$c\" via fe80::1 dev \"$stable_if\"")
    error_message = "translated replies return to the workload subnets through the stable data ENI"
  }
  assert {
    condition = { for k, r in aws_vpc_security_group_ingress_rule.nat64 : k => r.cidr_ipv6 } == {
      "shared-us-west-2a/default" = aws_subnet.nodegroup["default"].ipv6_cidr_block
      "shared-us-west-2b/workers" = aws_subnet.nodegroup["workers"].ipv6_cidr_block
    }
    error_message = "a NAT64 instance admits only the workload subnets assigned to it"
  }
  assert {
    condition = toset(flatten([for s in jsondecode(aws_iam_role_policy.nat64[0].policy).Statement : s.Action])) == toset([
      "ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface", "ec2:CreateTags", "ec2:DescribeNetworkInterfaces",
      "ec2:DescribeInstances", "autoscaling:CompleteLifecycleAction", "s3:GetObject",
    ])
    error_message = "the NAT64 role grants exactly the calls its user data makes"
  }
  assert {
    condition     = length(aws_internet_gateway.cluster) == 1 && alltrue([for r in aws_route.nat64_ipv4_default : r.gateway_id == aws_internet_gateway.cluster[0].id])
    error_message = "a created VPC with NAT64 gets its own internet gateway for the EIPs"
  }
  assert {
    condition     = toset(aws_vpc_endpoint.s3.route_table_ids) == toset(concat(values(aws_route_table.nodegroup)[*].id, values(aws_route_table.nat64)[*].id))
    error_message = "the S3 gateway endpoint serves the NodeGroup and NAT64 route tables"
  }
}
