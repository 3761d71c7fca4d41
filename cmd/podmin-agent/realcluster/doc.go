// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package realcluster is the real-cluster end-to-end test ("make
// e2e-cluster", build tag e2e): N real nodes (default 3) on this machine,
// each a network namespace with a mount namespace, a cgroup root, an
// address and a Pod /80 of its own running containerd with runsc, kubelet
// with its Pods API, CoreDNS and an unmodified podmin-agent with its eBPF
// dataplane, joined by a router namespace's bridge that routes each Pod
// /80 to its node, with one bucket on a real S3 server (versitygw) and the
// cluster's secrets in SSM Parameter Store (moto), so the agents run the
// aws provider's code paths. The podmin CLI drives it as a user would
// (connect, build, push, secret create, deploy, status, validate); setup
// runs in the test with an infrastructure of namespaces in place of
// OpenTofu/Terraform's.
//
// A client namespace opens new HTTPS connections at a fixed rate to the
// Service's VIP and by its name, through every node, and keeps requests
// going on long-lived connections; a sampler reads every kubelet's Pods
// API and every node's pinned dataplane maps. The proofs are what a user
// sees: (1) the cluster up with one leader, the Service's name answered by
// every node's DNS and from inside its Pods, the VIP answering from every
// Pod; (2) a maxUnavailable 1 rollout that fails no request and never has
// two nodes between revisions; (3) the same with the leader's agent
// SIGKILLed at +8 s, within 1.5 times the plain rollout; (4) the same with
// a waiting node's agent restarted; (4b) a one-node NodeGroup rolled with
// maxSurge 1 without a moment without a ready Pod; (5) client source ports
// reused after three rollouts all answered; (6) a lost node's endpoints
// gone from every dataplane within a stated bound, requests after it all
// answered, and podmin status naming the node; (7) the machine as it was
// after teardown. Each failure says what was lost, where and when.
//
// The test re-executes itself: inside a network and mount namespace of
// its own (the router's), and as the holders of the nodes' and the
// client's namespaces; the nodes' daemons run in their node's namespaces
// through nsenter. The clean check counts only what the test made.
package realcluster
