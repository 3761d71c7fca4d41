// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2enode is the plumbing of a real Podmin node on this machine,
// shared by the end-to-end tests of one node (realnode, "make e2e") and of
// a cluster of them (realcluster, "make e2e-cluster"), all of it built
// with the e2e tag: the node's mounts beneath its root (a tmpfs /run, a
// var, containerd's own tmpfs and a bpf filesystem), its cgroup root in
// every hierarchy, the runtime configuration a node's bootstrap writes
// (containerd with runsc, the CNI plugins, kubelet with its Pods API,
// CoreDNS), its daemons with their logs, the test's programs and images
// (built with podmin build and pushed with podmin push), kubelet's Pods
// API and DNS as a test asks them, the report of numbered proofs the
// scripts summarise, and the check that the machine is as it was.
//
// It does not decide what a proof proves, and it never changes anything
// outside the directories and namespaces it is given.
package e2enode
