# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

# Every value comes from podmin.auto.tfvars.json, which podmin setup writes.
# No variable ever holds a secret.

variable "cluster" {
  description = "The cluster ID: the podmin:cluster tag of every resource."
  type        = string
}

variable "region" {
  description = "The AWS region of the cluster."
  type        = string
}

variable "account_id" {
  description = "The AWS account the cluster lives in; empty skips the check."
  type        = string
  default     = ""
}

variable "bucket" {
  description = "The cluster bucket."
  type        = string
}

variable "vpc_cidr" {
  description = "The private IPv4 primary CIDR of the VPC."
  type        = string
}

variable "existing_vpc_id" {
  description = "A compatible untagged VPC with vpc_cidr to reuse (never deleted); empty creates one."
  type        = string
  default     = ""
}

variable "create_nonce" {
  description = "Drawn by the cluster's first setup and kept since: every resource is tagged podmin:create-nonce with it, the proof destroy requires."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.create_nonce))
    error_message = "create_nonce is 32 random bytes in lowercase hex."
  }
}

variable "amis" {
  description = "The pinned Debian 13 AMI of each architecture in use."
  type        = map(string)
}

variable "launch_generation" {
  description = "Changes on every setup; a new generation replaces the NAT64 instances."
  type        = string
}

variable "nodegroups" {
  description = "The NodeGroups by name; the map is authoritative."
  type = map(object({
    size          = number
    disk_size     = number
    instance_type = string
    zone          = string
    arch          = string
    subnet_index  = number
    nat64         = string
    user_data     = string
  }))
}

variable "nat64" {
  description = "The NAT64 instances by name: one shared per zone, or dedicated to one NodeGroup."
  type = map(object({
    zone          = string
    instance_type = string
    arch          = string
    subnet_index  = number
  }))
  default = {}
}

variable "agent_leader_port" {
  description = "The coordination gRPC port of the agents."
  type        = number
  default     = 8081
}

variable "otel_logs" {
  description = "The canonical --otel-logs value the node agents read from this file; empty disables container log export."
  type        = string
  default     = ""
}

variable "workload_ca_publish" {
  description = "The exact external S3 object of the workload CA bundle, or null."
  type = object({
    bucket = string
    key    = string
  })
  default = null
}

variable "jool_archives" {
  description = "The mirrored Jool module archive of each NAT64 architecture: bucket key and SHA-256."
  type = map(object({
    key    = string
    sha256 = string
  }))
  default = {}
}
