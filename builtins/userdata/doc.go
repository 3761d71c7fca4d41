// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package userdata renders the NodeGroup VMs' bootstrap script, aws.sh (the template aws.sh.tmpl),
// and gives NAT64 instances their verified Jool archive (the NAT64 script
// itself is part of the infrastructure module, which knows the stable ENI
// and the workload subnets it serves). The shell is fixed and
// idempotent; the renderer only fills in validated values and the compact
// dependency rows, strips comments and blank lines, gzips deterministically
// and encodes the bytes once in base64 as launch templates require.
//
// It must not talk to object storage or upstream: its input is the
// published dependency manifest.
package userdata
