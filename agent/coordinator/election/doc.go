// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package election elects one agent cluster-wide on the bucket's
// conditional writes. The lease is one small JSON record,
// dns/leader.json {leaderID, leaderAddr, lastUpdated}, created with a
// create-only write and renewed, taken over and resigned with
// compare-and-swap on its ETag.
//
// Staleness is never judged from lastUpdated, which is another node's wall
// clock: a follower takes over only when the ETag it observes has stayed
// the same for longer than Timeout on its own monotonic clock. A leader
// counts its lease from the moment it sent its last successful write and
// gives it up after Hold < Timeout, so at most one agent believes it leads
// at any instant as long as clocks run at about the same rate (a drift of
// up to (Timeout-Hold)/Timeout, a third, is tolerated).
//
// Bound on failover after a leader vanishes: at most
// Timeout + RenewInterval + one request latency after its last successful
// renewal (20 s plus latency with the defaults); a resignation is taken
// over at the followers' next poll, within RenewInterval.
//
// Quiet followers (Options.Quiet): a follower whose leader vouches for its
// lease over a live, authenticated link (the coordinator's heartbeats on
// the mTLS watch stream, bound to the leader's certificate and term) need
// not read the lease at all. The leader vouches only while it leads and
// is not behind on its renewals (its last successful write was sent less
// than RenewInterval + RetryInterval ago); a follower that hears nothing
// for the loss bound (the coordinator's: one RenewInterval), or whose link
// breaks, reads the lease at once and forgets the version it saw before
// the quiet spell, so a takeover still needs Timeout of its own
// observation: content-equal versions hide history. Safety is unchanged
// (a leader's Hold still ends before any follower's Timeout), and the
// failover bound grows by RetryInterval plus the loss bound, to
// Timeout + 2×RenewInterval + RetryInterval + one request latency after
// the last successful renewal: 26 s with the defaults instead of 20 s. A
// resignation ends the links at once, so it is still taken over within
// RenewInterval.
//
// It must not decide anything but leadership: leader work runs in the
// acquire callback's context, which ends when leadership ends. Once is
// the single campaign of a one-shot agent pass (the workload CA's leader
// for that pass).
package election
