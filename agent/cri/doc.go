// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package cri is the agent's client of the node's container runtime over
// CRI (containerd's socket beneath the node root). For the static-Pod
// reconciler it pre-pulls a new revision's images, as kubelet would pull
// them, before the Pod's file changes (staticpod.Prepuller), and tells
// when a replaced Pod's sandbox stopped (staticpod.Stopper). It never
// creates or removes containers: kubelet runs the Pods.
package cri
