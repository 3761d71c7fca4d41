// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Command podmin-agent is the node daemon. It takes exactly six
// configuration flags, exits non-zero when any is invalid, and otherwise
// reconciles its NodeGroup until SIGTERM.
//
// A few environment variables (PODMIN_ROOT, PODMIN_AGENT_ONCE,
// PODMIN_AGENT_HEALTH_ADDR, PODMIN_AGENT_REGISTRY_ADDR,
// PODMIN_AGENT_POLL_INTERVAL, PODMIN_AGENT_DNS_TTL_MARGIN,
// PODMIN_AGENT_DNS_ADDR, PODMIN_AGENT_API_ADDR, PODMIN_AGENT_NODE_ID,
// PODMIN_AGENT_NODE_ADDR, PODMIN_AGENT_DATAPLANE,
// PODMIN_AGENT_FLUENT_BIT_RESTART) relocate and pace the agent
// for tests, the quick start and the local node mode; they are not node
// configuration. --help documents all of them.
package main
