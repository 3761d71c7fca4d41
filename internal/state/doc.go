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
