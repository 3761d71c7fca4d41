// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package infra owns a cluster's cloud infrastructure as data: the validated
// description of what setup builds (Cluster, NodeGroup, NAT64), the embedded
// AWS OpenTofu/Terraform module and its rendering into a working directory,
// the OpenTofu/Terraform runner, and the EC2 checks that run before it (VPC
// selection, zones, instance types, AMIs).
//
// It must not read flags, print, prompt, or import builtins, starlark or
// cmd; secret values never reach it, so none can enter a generated file,
// an argument or an environment variable it passes on.
package infra
