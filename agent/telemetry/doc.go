// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package telemetry owns the node side of container log export beneath
// /run/podmin/telemetry: the private exporter CA bundle (CABundle),
// Fluent Bit's client-only workload identity with its generations
// (Identity), and the mode 0600 Fluent Bit configuration written before
// each start (WriteConfig).
//
// It must not touch /run/podmin/workloads, which belongs to the static-Pod
// reconciler, and must never log or return a header value: values are
// registered with a scrub.Registry the moment they are read. It does not
// run Fluent Bit; a restart hook given by the daemon does.
package telemetry
