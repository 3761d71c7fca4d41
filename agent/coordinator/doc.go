// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package coordinator is the cluster-wide coordination of Service
// endpoints: one agent, elected on the bucket (package election), collects
// every node's ready endpoints, builds deterministic Service snapshots and
// persists them to dns/services.pb. Each snapshot carries the leader's
// lease term, and writes are fenced by term, generation and revision, so a
// superseded leader's write is refused; nodes order snapshots by term and
// adopt the one of the leadership the lease names, and the leader rewrites
// a corrupt or deleted object, so a damaged snapshot never freezes a node.
// Followers keep their last snapshot for the lease window during a
// partition, then clear leased backends while keeping Service DNS
// identities.
//
// The leader binds node IDs to the NodeGroup, address and Pod prefix of
// their first live Hello (checked against the certificate) and publishes
// that registry in the snapshot; it refuses a second agent under a live
// node ID and any claim on another node's address or prefix, and accepts
// endpoints only for Services the node's NodeGroup defines. A leaving node
// drains (Drain, Leave): the snapshot without its endpoints is written
// before it stops.
//
// A node's endpoints come from its own reconciler (the Coordinator is the
// static-Pod reconciler's Publisher of Services) and the kubelet Pods API
// watcher (PodsChanged): ready Pods matching each Service, at addresses
// inside the node's Pod /80. The Coordinator hands the resulting view to
// DNS and the dataplane (OnView) and the leader's index hints to the
// reconcile loop (OnIndexHint).
//
// The leader polls deployments/index.json every IndexPollInterval (one
// HEAD while unchanged; Options.Index) and hints every follower over its
// watch stream with the new ETag and write ID before it reads the new
// body (nodes of NodeGroups the metadata proves unchanged spread their
// check over UnrelatedSpread), so a commit reaches every node within about half a second while
// followers poll the bucket only as a slow safety net (Hinted says when
// they may). Every 2 s the leader also sends a heartbeat on each watch
// (heartbeat.go) with its term, the index version it polled last and its
// node count: while heartbeats arrive a follower reads neither the lease
// (election.Options.Quiet) nor the index, except for a safety poll every
// SafetyPollPerNode × nodes within [MinSafetyPoll, MaxSafetyPoll]
// (SafetyPoll), so an idle fleet's bucket requests do not grow with its
// size. A watch that hears no heartbeat for one renew interval is ended,
// and the follower reads the lease and the index again at once. The same reads feed
// the snapshot's Services and the repair of the NodeGroup views
// (state.ViewKeeper): a view a committer left stale is rewritten within
// one poll, and every view is checked every ViewCheckInterval.
//
// Observed state and rolling updates: each node reports what it runs of
// every deployment of its NodeGroup (the reconciler's applied and desired
// revisions, kubelet readiness from the Pods API, restarts, errors;
// DeploymentsChanged, PodsChanged, KubeletLost), and the leader publishes
// one status object per NodeGroup (status/nodegroups/<ng>.json) only when
// it changes. The Coordinator is the reconciler's Gate: a node asks the
// leader for a rollout slot before it replaces a running Pod with a new
// revision; the leader grants slots as the DaemonSet's maxUnavailable
// allows over the NodeGroup's expected nodes (a node without a report,
// of unknown readiness or missing counts as unavailable; only one known
// broken gets a slot regardless), withdraws the Pod's endpoints from the
// snapshot before it answers, frees a slot when the node reports the
// revision ready or its registration lapses, and reports a node stuck
// after SlotTimeout. The node replaces the Pod only after every live node
// confirmed (Applied, ConfirmApplied) that its DNS and dataplane hold the
// snapshot without those endpoints, and a Drain after that (withdraw.go,
// slotwait.go); each wait is bounded by the lease window. Without an
// answering leader a node applies after a deterministic per-node delay
// (LeaderlessAfter, LeaderlessStep). The index says what each Pod is; the
// leader paces only when.
//
// Under maxSurge (surge.go) a node asks for a surge slot instead, which
// withdraws nothing: the leader grants it while fewer than maxSurge of
// the NodeGroup's nodes run two Pods of the deployment (or hold a slot,
// or have not reported yet), and at once to a node whose Pod is known
// broken. The node starts the new revision beside the old Pod, and lets
// the old one go (Retire) only once the new one is ready (kubelet's word
// and the probeless hold; it passes again as soon as it is), at once when
// the old one serves nothing, and otherwise after a retire slot: the old
// Pod's endpoints, and only its (by incarnation), are left out of what the
// node reports, the leader writes that snapshot, every live node confirms
// it and the drain passes, as for a replacement. The endpoints of that
// one run stay out until kubelet no longer lists it. The slot frees when
// the node reports the new revision ready and one Pod again.
//
// A new leadership starts from the last published snapshot's backends
// when it can tell they are what the nodes serve (seedSnapshot), and a
// node reports or publishes its own endpoints only once its kubelet
// listed its Pods, so neither a failover nor an agent restart drops a
// live, ready endpoint. A node the leader refuses says so (OnRefused)
// and the leader names it in its NodeGroup's status object.
//
// It never writes desired state (deployments/index.json and payloads), only
// the derived NodeGroup views and the NodeGroups' status objects, and does
// not serve DNS or program the dataplane: it hands snapshots to them.//
// The agent's side (node.go, node_addrs.go, dataplane_feed.go): Node
// assembles a node's share of coordination from NodeOptions, whose
// Settings come from the agent's environment (SettingsFromEnv): the node's
// mTLS identity from the cluster CA, the coordination API's listen and
// advertised addresses (loopback ports in local node mode), the
// Coordinator, Service DNS restored from the durable snapshot before it
// serves, and the eBPF dataplane fed from the coordinator's view with the
// VIPs, Service ports and ready backends, its lease renewed from the
// leader's confirmations. Node.Serving lists them as components in start
// order; their problems are /readyz reasons and never stop Pod
// publication. DeploymentStatus serves the node's deployment reports as
// metrics and /readyz?verbose lines.
package coordinator
