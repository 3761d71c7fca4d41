// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package state owns the meaning of the cluster bucket: the one definition of
// every object path (and how to parse and validate them), the deployments
// index deployments/index.json with its exact JSON form, SHA-512 content
// addressing of Pod and Service payloads, and the compare-and-swap commit
// protocol every writer of desired state uses.
//
// The CLI and the node agents both import it, so the layout cannot drift
// between writer and reader. It must not know how objects are stored (that is
// objstore), how manifests are parsed or validated (that is manifest), or
// anything about providers, nodes or kubelet. It never deletes payloads:
// delete only removes an index entry, and orphaned payloads are invisible by
// design.
//
// # Index encoding
//
// The index is a JSON object keyed by "<nodegroup>/<deployment>" whose values
// are {"pod": "<path>", "service": "<path>"}, service omitted when absent.
// Encode writes keys in ascending byte order, two-space indentation, one
// member per line and a trailing newline, so equal indexes are equal bytes.
// Decode accepts any JSON whitespace but is otherwise strict: unknown or
// duplicate fields, malformed keys, non-canonical paths, a Pod path under
// another NodeGroup and a Service identity owned twice are all errors.
//
// An entry may also carry "revisions": the last MaxRevisions revisions
// deploy committed for it, newest first, each with its payload paths, its
// Pod's images, and the time and write ID of the index write that
// committed it (revisions.go). It is encoded as compact JSON on one line
// after the paths. An entry without it (written before revisions were
// recorded) is valid; the first deploy that replaces it records it as a
// revision whose time and write are unknown. Delete drops the revisions
// with the entry. Rollback commits an earlier revision's payloads again
// through Deploy, and payloads a revision names count as referenced.
//
// # Commit protocol
//
// Committer.Deploy reads the index and its ETag first. An entry that
// already equals the target writes nothing to the index; its payloads are
// proven present and intact (below), and one that is missing or holds
// other bytes is rewritten, making the outcome Repaired instead of
// Unchanged. Otherwise every payload of the entry is made present (created
// create-only, or proven by a Head; an existing object with other bytes is
// replaced with a write conditional on its ETag and reported), and the
// index is written back with If-Match (create-only when it does not exist
// yet). A mutation that changes nothing writes nothing. A lost race
// re-reads and re-applies, with bounded, jittered exponential backoff. The
// rules (one owner per Service identity) are checked inside the mutation,
// against the version being replaced, so they hold under races.
//
// # A missing index
//
// Only a new cluster has no index. An absent index in a bucket that holds
// NodeGroup views (written only after an index commit) was lost, and
// reading it as empty would make a deploy commit an index holding only
// its own entry, which every node then reconciles by stopping every other
// Pod. Pod payloads alone prove no commit (two first deploys see each
// other's, a failed one leaves its own). CheckIndexAbsence tells the two
// apart with one LIST of one key;
// ReadDesiredIndex and commits with RefuseLostIndex use it and fail with
// ErrIndexMissing, naming "podmin index rebuild" (PlanRebuild), instead.
// The check precedes a create-only write, so a concurrent rebuild is
// never overwritten; what it cannot see is an index created and lost
// again between the two requests.
//
// # Payload stamps
//
// A payload is immutable and named by its SHA-512, so its bytes, once
// verified, stay valid in the local cache. Whether the bucket still holds
// them is another question: an object can be deleted or overwritten by
// hand. The cache therefore records, per bucket and payload path, the
// stamp (ETag and size) of the stored object the bytes were verified
// from (PayloadStamps). The stores derive the ETag from the bytes, so a
// listing or a Head showing the same stamp shows the same bytes; any other
// stamp, or none recorded, means the object is read and verified again.
// List and preview check presence and identity with one paginated LIST of
// each NodeGroup's Pod payload prefix (and of the Service payload prefix),
// and deploy with one Head per payload it expects to exist. The cache
// never vouches for an object it did not check.
//
// # Write IDs and lost replies
//
// Every index write carries a fresh random write ID in the object's
// metadata (WriteIDMeta), together with the IDs of the version it read and
// the versions before that (WriteChainMeta, newest first, bounded). The
// body stays exactly the specification's format.
//
// A write that fails any other way than a refused condition (or an error
// proving the request never reached the store, objstore.ErrNotApplied) is
// ambiguous: the store may have applied it. The committer re-reads the
// index at once and concludes only what the re-read proves:
//
//   - Its own ID is in the chain: it landed (perhaps built upon since),
//     and the operation succeeds with the outcome computed against its
//     base. Only that one request ever wrote the ID, and an ID is copied
//     into a chain only by a writer that read the version carrying it.
//   - The version read is the base itself (same write ID): nothing has
//     replaced the base, so the write did not land, and the mutation is
//     applied again. The same holds when base and re-read are both absent,
//     as nothing deletes the index.
//   - Anything else is unknown, even when the base's ID is in the chain
//     and this write's is not. If-Match compares ETags, and ETags are
//     hashes of the body (MD5 on S3, SHA-256 locally). When the body
//     returns to earlier bytes — W1's deploy of X lands and its reply is
//     lost, W8 deletes X again — a writer W2 that read the earlier version
//     before W1 wrote passes its If-Match, and its write records the chain
//     of the version it read, erasing W1's and W8's IDs. Taking "the base's
//     ID without mine" for "did not land" would apply X a second time,
//     after W8's delete. Nothing on the store can refuse W2's write, and
//     the body must stay byte-exact to the specification, so versions
//     cannot be told apart by content. The chain before a version's own ID
//     is therefore evidence of presence, never of absence.
//
// An unknown outcome is settled without writing when the re-read index
// already has the mutation's effect (the entry equals the target, or is
// gone for a delete): the operation succeeds with LostReply set, since
// whichever writer produced it, the desired state is committed. Otherwise
// it fails with ErrOutcomeUnknown and tells the operator to check with
// "podmin list" before repeating the command. When the attempts run out
// right after an ambiguous write, one more read resolves it.
//
// One premise no protocol on an object store can do without: a write whose
// failure the client has seen does not land after the client's next read.
// A request still in flight inside the store could land whenever the body
// next returns to the bytes its If-Match names, whatever any writer
// concluded meanwhile, and conditional writes cannot fence it off. The S3
// client reports a failure only after the connection that carried the
// request is gone, and Podmin relies on the store having finished or
// abandoned the request by then.
//
// # NodeGroup views
//
// deployments/index.json stays the single commit point, byte-exact in the
// specification's format. Beside it, deployments/nodegroups/<ng>.json
// holds each NodeGroup's view: the index restricted to that NodeGroup's
// entries, in the same canonical form ("{}\n" when it has none), with the
// write ID of the index version it came from as object metadata
// (ViewSourceMeta). Views are derived and never authoritative: the
// committer writes the view of the NodeGroup it changed right after its
// index write, the leader repairs views, and a reader uses one only when
// the index vouches for its bytes. A node then reads its NodeGroup's
// change, not the whole index, and learns that a commit did not concern
// it without reading any entries at all.
//
// What vouches is the index's own metadata, written atomically with the
// body: next to the write-ID chain, every write records which NodeGroups
// the recent writes changed (WriteNodeGroupsMeta). For the version's chain
// C it lists, per recently changed NodeGroup, the position a of the write
// C[a] that last changed it and the digest (ViewDigest: SHA-256 over the
// NodeGroup's name and its view's bytes, 64 bits) of its view in this
// version; and a horizon h such that no write in C[0..h-1] changed a
// NodeGroup that is not listed. A writer computes its change against the
// content it read (its base) and carries the base's record forward, one
// position older; what no longer fits the 1,000-byte metadata budget
// beside the 24-ID chain (about 12 NodeGroups) is dropped from the oldest end,
// pulling the horizon before it. A rebuild, whose base could not be read,
// starts the horizon again at 0.
//
// IndexMeta.NodeGroup turns that into two proofs for a reader that
// published its NodeGroup from the version with write ID V:
//
//   - Unchanged: V is at position j of the chain and the NodeGroup's last
//     recorded change is at a position >= j (or it is not listed and j <=
//     h): no write after V changed it. Nothing is read beyond the
//     metadata (one HEAD of the index).
//   - Digest: the view's digest in this version. Equal to the digest of
//     what the reader published, the NodeGroup is unchanged whatever the
//     chain says; otherwise a view whose bytes have this digest is exactly
//     the NodeGroup's entries in this version, whoever wrote it and from
//     whichever version. A missing, stale, foreign or hand-edited view
//     fails the digest (ErrViewStale) and the reader reads the index.
//
// Why the chain can be trusted for this although it cannot prove a lost
// write absent ("Write IDs and lost replies"): a stale writer's fork
// erases IDs, it never invents transitions. Its If-Match succeeded only
// because the body equalled its base's bytes, so the version it replaced
// had its base's content, and the change it records (computed from that
// content) is the true change of the version it replaced. The recorded
// transitions therefore still describe real content changes; the erased
// versions are simply no longer in the chain, and a reader whose V was
// erased falls back to the digest, then the view or the index. The
// NodeGroup is part of the digest because every empty view has the same
// bytes, and NodeGroups are named in the metadata by 32 bits of SHA-256:
// two NodeGroups sharing that tag only cost reads, since their digests
// differ.
//
// A reader still confirms, before it publishes, that the index ETag is
// the one whose metadata it acted on, as the specification requires, so a
// view stands in for "the complete index filtered to the NodeGroup" of
// exactly that version. The view write after the index write is not
// atomic with it: a committer that stops in between, or a slower one that
// overwrites a newer view, leaves a view that fails its digest until the
// leader rewrites it; readers meanwhile read the index. Correctness never
// depends on a view, only cost does — with one exception: when the index
// itself is lost, the views are the newest evidence of what it held, and
// PlanRebuild uses them (and their write times) to tell a deleted
// deployment from a live one rather than restore every payload it finds.
//
// # Namespace replacement
//
// Deployment identity is <nodegroup>/<name>, so deploying a same-named
// DaemonSet from another namespace replaces the entry, and the caller must
// warn. The index holds paths only, so the replaced entry's namespace comes
// from its Service path when it has one (a Service shares its DaemonSet's
// namespace) and otherwise from metadata.namespace of its Pod payload. That
// is read after the commit, from the local payload cache when it holds the
// Pod (CommitOptions.Cache) and otherwise from the bucket, verified against
// its digest, so nothing is read between the index read and its
// conditional write. An entry whose namespace cannot be read is not
// reported as a replacement: the warning only states what is known.
//
// # Observed state
//
// status/nodegroups/<nodegroup>.json (NodeGroupStatusPath) is what the
// nodes of one NodeGroup report about each of its deployments, published
// by the coordination leader (NodeGroupStatus): the revision each node's
// static Pod runs, kubelet readiness, restarts and errors, the expected
// node count from the cluster configuration (NodeGroupSizes) and the
// leader's rollout slots. It is rewritten only when it changes; a reader
// proves it current with the lease (ReadLease): the leader of its term
// must hold a live one. It is observation, never desired state: nothing
// reconciles from it.
package state
