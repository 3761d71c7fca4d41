// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package staticpod reconciles one NodeGroup's committed desired state into
// kubelet's static Pod directory, in the order the specification gives:
// read the index version and its ETag, keep this NodeGroup's entries,
// fetch only their immutable payloads (each verified against its
// SHA-512), transform and stage the complete candidate set (Pods, secret
// values, Services), pre-pull the images the set adds to the node
// (Options.Prepull, so that kubelet's stop and start of an updated Pod
// does not wait for a download; a Pod whose new revision's images cannot
// be pulled keeps its running revision and is reported, state.ErrorImage,
// and tried again at the base poll pace), confirm the
// index ETag is unchanged, then publish: per Pod its values and an
// atomically renamed file, then removal of stale *.yaml files and the workload
// directories of deleted Pods, and only after those the Service desired
// state.
//
// One bad Pod never blocks its NodeGroup: a deployment whose payload is
// missing, corrupt or oversized, whose values cannot be fetched, whose
// new images cannot be pulled, or whose values, identity or file cannot
// be written (a Pod is published only once every host directory Podmin
// mounts into it exists) keeps its last valid file and Service
// and is reported by name (PodsFailedError, Counters); every other Pod is
// published, stale files and the workload directories of deleted Pods are
// removed, and Services are published. A failure of the pass as a whole
// (index unreadable, bucket missing, directory unusable) leaves the node
// exactly as it was; a failure during publication leaves every file either
// old or new (never partial, since temporary files are short hidden dot
// files kubelet ignores) and converges on the next attempt.
//
// When a Pod's running revision differs from the committed one, an
// optional Gate decides when it is replaced (rolling updates): a held Pod
// keeps its file, values and Service, is reported (Result.Held,
// DeploymentState.Waiting), and is asked about again at the next poll. The
// index stays the one source of what each Pod is; the Gate paces only
// when. New Pods, deletions and file changes within one revision never
// wait. After every pass that read the index the reconciler reports each
// deployment's applied and desired revision and its failure, by kind
// (Deployments, Hooks.Deployments).
//
// A deployment whose payload carries maxSurge (manifest.PodStrategy)
// starts a new revision beside the running Pod instead (surge.go): the
// Gate lets it start (Surge), the new file is written under the
// deployment's other static Pod name (its Pod name, or
// nodepod.SecondName, <pod>.surge: kubelet runs one static Pod of a full
// name at a time), and the old file is removed once the Gate lets the old
// Pod go (Retire). Both Pods are the deployment's: the second one carries
// the same workload identity (annotated under the deployment's Pod name
// before it is renamed), mounts the same values and workload directory
// (/run/podmin/workloads/<pod>), and its revision's values replace the
// old revision's there when it is written, as they do before an in-place
// replacement. The files are the whole state: a pass that finds two files
// of a deployment retires one before it writes anything (the one not of
// the committed revision; when neither is, the newer first), so a node
// never runs three, and an agent restarted at any step goes on from what
// the files say. The deployment's state names both (Applied and
// Retiring).
//
// Nothing desired is an explicit empty index ({}), which podmin delete
// leaves when it removes the last deployment. A missing bucket is
// ErrBucketMissing, and an index absent after this node had a desired state
// (an index read by this process, or static Pods of an earlier run on disk)
// is ErrIndexMissing: a bucket being deleted key by key loses its index
// first. Both remove nothing. Only a node that never had a desired state
// reads an absent index in an existing bucket as empty (a new cluster). An
// index that
// changes during a pass restarts the pass at once (bounded); that is no
// failure. Work is serialized: one Reconciler owns one NodeGroup's
// directory.
//
// The NodeGroup's entries are learned as cheaply as the index proves them
// (state.IndexMeta, "NodeGroup views" in package state): a pass HEADs the
// index; the same ETag as the applied version ends it (an idle poll is
// that one request); otherwise the index metadata may prove the
// NodeGroup's entries unchanged since the applied version (a commit to
// another NodeGroup: still one request, no body), or give the digest of
// the NodeGroup's view, which is then read and used only if its bytes
// have it; without a proof, or when the view fails its digest, the pass
// reads the complete index. Whatever was read, the pass confirms the
// ETag before it publishes, so a view stands for exactly the entries the
// index held; a stale, missing or edited view costs a read of the index
// and never changes what is published. Payloads are content-addressed,
// so the ones already staged are reused instead of read again.
//
// The loop polls every DefaultInterval, or every DefaultHintedInterval
// while the leader's index hints reach the node (Loop.Hint runs a pass at
// once unless it names the applied version), or, after a clean pass, at
// the slower pace LoopOptions.Vouched returns while the leader's
// heartbeats name the index version it polled. On a local bucket an
// IndexWatcher turns the operating system's notice of a commit into an
// immediate pass (Loop.Trigger); the poll stays the correctness path. The
// reconciler writes its own metric families (WriteMetrics).
//
// A Pod's workload directory (/run/podmin/workloads/<pod>: identity and
// values) and everything the reconciler and the identity manager remember
// of the Pod go together: removed in one place when the Pod leaves, and
// never vouched for by a cache without a look at the files. Each run of a
// revision carries its own podmin.dev/incarnation, so kubelet never takes
// a Pod that returns to an earlier revision for the Pod that ran it then.
//
// It must not write desired state, and it knows nothing of kubelet beyond
// its static Pod directory.
package staticpod
