# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# Outputs name resources; none carries a secret.

output "vpc_id" {
  value = local.vpc_id
}

output "vpc_created" {
  value = local.create_vpc
}

output "nodegroups" {
  value = { for k, asg in aws_autoscaling_group.nodegroup : k => asg.name }
}

output "nat64_data_enis" {
  value = { for k, eni in aws_network_interface.nat64_data : k => eni.id }
}
