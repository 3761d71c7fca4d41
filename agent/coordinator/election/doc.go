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
// It must not decide anything but leadership: leader work runs in the
// acquire callback's context, which ends when leadership ends.
package election
