// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package realnode is the real-node end-to-end test ("make e2e", build tag
// e2e): an unmodified kubelet, containerd with gVisor's runsc as the only
// runtime, the CNI plugins, CoreDNS and podmin-agent in local node mode run
// Podmin's Pods on this machine, driven only through the podmin CLI. It
// proves, with figures, that a deployed Pod runs under runsc and answers on
// its Pod IP, that the agent sees it ready through kubelet's Pods API, that
// its workload identity verifies against the cluster CA, that its Service
// resolves through the agent's DNS and answers on its VIP through the eBPF
// dataplane, how long a rollout leaves the Service without an answer, that
// a mounted secret is readable in the container and nowhere else, that
// podmin deploy --wait returns once the new Pod answers and fails with the
// node's error for an image whose command exits, that the rollout recipe
// stops at a failing canary NodeGroup, how long a commit takes to show as
// ready in podmin status, and that a delete leaves the node clean. It then
// breaks the node as an operator's day does and proves it loses no
// workload and says why: a lost index (deploy refuses, index rebuild
// restores, no Pod stops), a rollback that counts no restarts, an image
// that cannot be pulled (the running revision serves on), a failing
// readiness probe named in --wait's error, a delete and deploy of the same
// name, an agent SIGKILLed (no call to the Service fails), kubelet down, a
// full disk, and a wait started right after a fix.
//
// The node runs in network and mount namespaces of its own (the test
// re-executes itself inside them), with every path beneath one temporary
// directory: /run and /var inside are that directory's run (a tmpfs) and
// var, so kubelet, containerd and the agent use a node's real paths without
// touching the machine's; containerd's root is a small tmpfs a proof can
// fill, and the node has a bpffs of its own for the pinned dataplane. The
// clean checks count only what the node made after its isolation. Its sub-packages are the programs the test
// builds: hello (the workload), pause (the sandbox image) and shimoom (the
// gVisor shim wrapper for machines that withhold CAP_SYS_RESOURCE); the
// node's plumbing, shared with the real cluster (realcluster), is
// cmd/podmin-agent/internal/e2enode.
package realnode
