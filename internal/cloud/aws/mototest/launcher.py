# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Starts moto's server (moto 5.2) on a loopback port for Podmin's tests,
# with the fixes it needs to serve the AWS OpenTofu/Terraform module and
# podmin setup/destroy. Test tooling only: it is never shipped.
#
#   python3 launcher.py PORT AMIS_JSON
#
# Each patch below names the moto behaviour it corrects. The environment
# settings must be in place before moto is imported.
import json
import os
import sys

port, amis_path = sys.argv[1], sys.argv[2]

# moto does not load the AWS-managed IAM policies unless told to, so the
# module's attachment of AmazonSSMManagedInstanceCore fails with NoSuchEntity.
os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"

# setup pins the newest official Debian 13 AMI (owner 136693071363) per
# architecture; moto's bundled AMIs hold none. Their creation_date is left
# out: moto parses it into a datetime that its serializer then fails on.
amis = []
for arch, ec2_arch, ami in (("amd64", "x86_64", "ami-0d0b13a1f0a0d0e01"), ("arm64", "arm64", "ami-0d0b13a1f0a0d0e02")):
    amis.append({
        "ami_id": ami,
        "name": "debian-13-%s-20260101-0000" % arch,
        "description": "Debian 13 (%s)" % arch,
        "owner_id": "136693071363",
        "public": True,
        "virtualization_type": "hvm",
        "architecture": ec2_arch,
        "state": "available",
        "platform": None,
        "image_type": "machine",
        "hypervisor": "xen",
        "root_device_name": "/dev/xvda",
        "root_device_type": "ebs",
        "sriov": "simple",
    })
with open(amis_path, "w", encoding="utf-8") as f:
    json.dump(amis, f)
os.environ["MOTO_AMIS_PATH"] = amis_path

import moto.server  # noqa: E402
import moto.ec2.models.elastic_network_interfaces as enis  # noqa: E402
from moto.ec2.models.subnets import Subnet, SubnetBackend  # noqa: E402
from moto.ec2.models.vpcs import VPCBackend  # noqa: E402
from moto.ec2.models.launch_templates import LaunchTemplateBackend  # noqa: E402
from moto.ec2.responses.subnets import Subnets  # noqa: E402
from moto.ec2.responses.vpcs import VPCs  # noqa: E402


# CreateSubnet of an IPv6-only /64 reports AvailableIpAddressCount as
# 2^64-5, which the AWS provider cannot parse into its int32: the subnet is
# created but left out of the state, and destroy then waits on it forever.
# AWS counts only IPv4 addresses there: an IPv6-only subnet has none.
_count = Subnet.available_ip_address_count.fget


def _available_ip_address_count(self):
    if not self.cidr_block:
        return 0
    return _count(self)


Subnet.available_ip_address_count = property(_available_ip_address_count)


# The subnet's IPv6 association state is serialised as a nested dict
# ({"state": {"State": "associated"}}), so the provider never reads
# "associated" and times out waiting for the association.
def _ipv6_cidr_block_association_set(self):
    out = []
    for a in self.ipv6_cidr_block_associations.values():
        state = a["ipv6CidrBlockState"]["State"]
        if state == "associated":
            out.append({"ipv6CidrBlock": a["ipv6CidrBlock"], "associationId": a["associationId"],
                        "ipv6CidrBlockState": {"state": state}})
    return out


Subnet.ipv6_cidr_block_association_set = property(_ipv6_cidr_block_association_set)


# ModifySubnetAttribute ignores EnableResourceNameDnsAAAARecordOnLaunch,
# EnableDns64 and PrivateDnsHostnameTypeOnLaunch, so the provider reads the
# old values back and waits for a change that never comes. They are stored
# and described as AWS does.
Subnet.enable_dns64 = False
_modify_backend = SubnetBackend.modify_subnet_attribute


def _modify_subnet_attribute_backend(self, subnet_id, attr_name, attr_value):
    subnet = self.get_subnet(subnet_id)
    if attr_name == "enable_dns64":
        subnet.enable_dns64 = attr_value
    elif attr_name == "enable_resource_name_dns_aaaa_record_on_launch":
        subnet.private_dns_name_options_on_launch["EnableResourceNameDnsAAAARecord"] = attr_value
    elif attr_name == "private_dns_hostname_type_on_launch":
        subnet.private_dns_name_options_on_launch["HostnameType"] = attr_value
    else:
        _modify_backend(self, subnet_id, attr_name, attr_value)


SubnetBackend.modify_subnet_attribute = _modify_subnet_attribute_backend
_modify_response = Subnets.modify_subnet_attribute


def _modify_subnet_attribute_response(self):
    subnet_id = self._get_param("SubnetId")
    for attr in ("EnableDns64", "EnableResourceNameDnsAAAARecordOnLaunch"):
        value = self._get_param(attr + ".Value")
        if value is not None:
            self.ec2_backend.modify_subnet_attribute(subnet_id, {
                "EnableDns64": "enable_dns64",
                "EnableResourceNameDnsAAAARecordOnLaunch": "enable_resource_name_dns_aaaa_record_on_launch",
            }[attr], str(value).lower() == "true")
    hostname = self._get_param("PrivateDnsHostnameTypeOnLaunch")
    if hostname is not None:
        self.ec2_backend.modify_subnet_attribute(subnet_id, "private_dns_hostname_type_on_launch", hostname)
    return _modify_response(self)


Subnets.modify_subnet_attribute = _modify_subnet_attribute_response


# RunInstances in an IPv6-only subnet builds each network interface's
# private DNS name by splitting an IPv4 address the interface does not have
# and fails with HTTP 500, which the Auto Scaling Group retries for minutes.
# Such an interface gets a name from its address, as AWS's resource-based
# hostnames do without IPv4.
_dns_from_ip = enis.generate_dns_from_ip


def _generate_dns_from_ip(ip, dns_type="internal"):
    if ip and ip.split("/")[0].count(".") == 3:
        return _dns_from_ip(ip, dns_type)
    return "ip6-%s.ec2.%s" % (str(ip).split("/")[0].replace(":", "-"), dns_type)


enis.generate_dns_from_ip = _generate_dns_from_ip


# CreateLaunchTemplate copies the tags of the template itself (its
# "launch-template" tag specification) into the template's data, where AWS
# accepts no such resource type, so every re-plan sees a tag specification
# the module never declared and replaces the launch template's version.
_create_launch_template = LaunchTemplateBackend.create_launch_template


def _create_launch_template_without_own_tags(self, name, description, template_data, tag_spec):
    specs = template_data.get("TagSpecifications")
    if specs:
        template_data["TagSpecifications"] = [s for s in specs if s.get("ResourceType") != "launch-template"]
    return _create_launch_template(self, name, description, template_data, tag_spec)


LaunchTemplateBackend.create_launch_template = _create_launch_template_without_own_tags


# CreateVpcEndpoint ignores IpAddressType, so a dual-stack gateway
# endpoint always reads back without one and every re-plan changes it.
_create_vpc_endpoint = VPCs.create_vpc_endpoint


def _create_vpc_endpoint_with_ip_address_type(self):
    result = _create_vpc_endpoint(self)
    ip_address_type = self._get_param("IpAddressType")
    if ip_address_type:
        result.result["VpcEndpoint"].ip_address_type = ip_address_type
    return result


VPCs.create_vpc_endpoint = _create_vpc_endpoint_with_ip_address_type


# ModifyVpcEndpoint adds and removes a gateway endpoint's route tables
# without their routes to the service's prefix list, so a route table
# added after creation (a NodeGroup added by a later setup) has none, and
# DeleteVpcEndpoints then fails with InvalidRoute.NotFound on it.
_modify_vpc_endpoint = VPCBackend.modify_vpc_endpoint


def _modify_vpc_endpoint_with_routes(self, vpc_id, **kwargs):
    endpoint = self.describe_vpc_endpoints(vpc_end_point_ids=[vpc_id])[0]
    before = set(endpoint.route_table_ids or [])
    _modify_vpc_endpoint(self, vpc_id, **kwargs)
    prefix_list = endpoint.destination_prefix_list_id
    if prefix_list:
        after = set(endpoint.route_table_ids or [])
        for rt in sorted(after - before):
            self.create_route(rt, None, gateway_id=endpoint.id, destination_prefix_list_id=prefix_list)
        for rt in sorted(before - after):
            self.delete_route(rt, None, destination_prefix_list_id=prefix_list)


VPCBackend.modify_vpc_endpoint = _modify_vpc_endpoint_with_routes

moto.server.main(["-H", "127.0.0.1", "-p", port])
