// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package pods watches kubelet's local Pods API
// (k8s.io/kubelet/pkg/apis/pods/v1alpha1 over a unix socket) and keeps the
// node's current Pods, so Service endpoint selection can pick the
// namespace- and selector-matching Pods whose kubelet-computed PodReady
// condition is true.
//
// Every watch update is only a hint: hints are coalesced into one refresh
// of the complete ready set, and after a disconnect the watcher relists
// periodically until the stream is back, so correctness never depends on
// seeing every event. It must not change Pods or talk to anything but
// kubelet's socket. NewKubelet is the agent's watcher of the node's
// kubelet, reporting a kubelet that does not answer as the reason the node
// is not ready.
package pods
