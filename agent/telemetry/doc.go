// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package telemetry owns the node side of container log export beneath
// /run/podmin/telemetry: the private exporter CA bundle (CABundle),
// Fluent Bit's client-only workload identity with its generations
// (Identity), and the mode 0600 Fluent Bit configuration written before
// each start (WriteConfig). Export is the agent's log export component:
// it follows the cluster's --otel-logs setting, keeps those three
// current, restarts Fluent Bit through a hook when they change, serves
// the route Fluent Bit's unit asks before each start, and names its
// failures in /readyz without ever holding Pods back.
//
// It must not touch /run/podmin/workloads, which belongs to the static-Pod
// reconciler, and must never log or return a header value: values are
// registered with a scrub.Registry the moment they are read. It does not
// run Fluent Bit; a restart hook (a command on a cloud node) does.
package telemetry
