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
// Committer.Deploy writes missing payloads create-only (verifying existing
// ones instead of rewriting them), then reads the index and its ETag, applies
// the mutation and writes it back with If-Match (create-only when the index
// does not exist yet). A mutation that changes nothing writes nothing. A lost
// race re-reads and re-applies, with bounded, jittered exponential backoff.
// The rules (one owner per Service identity) are checked inside the mutation,
// against the version being replaced, so they hold under races.
//
// A write that fails any other way is ambiguous: the store may have applied
// it. The committer then re-reads the index and looks at the affected key
// only. If the key holds the mutation's target (the entry it wrote, or no
// entry for a delete), the desired state is committed and the operation
// succeeds: either this write landed, or another writer committed the same
// state for the same key, which is indistinguishable to every reader because
// an entry is fully described by its content-addressed paths. If the key
// still holds the value the failed write was based on, the write did not land
// and the mutation is re-applied to the fresh index. Anything else means the
// write may have landed and been superseded by a writer of the same key;
// re-applying could apply it twice, so the operation fails with
// ErrOutcomeUnknown and tells the operator to check with "podmin list".
// (A same-key writer that restores exactly the pre-image inside the window
// is indistinguishable from a write that never landed; on stores whose ETag
// is a content hash nothing can tell them apart.) When the attempts run out
// right after an ambiguous write, one more read resolves it the same way.
// The Outcome reported after a resolved ambiguity is the one computed
// against the version the write was based on.
//
// # Namespace replacement
//
// Deployment identity is <nodegroup>/<name>, so deploying a same-named
// DaemonSet from another namespace replaces the entry, and the caller must
// warn. The index holds paths only, so the replaced entry's namespace comes
// from its Service path when it has one (a Service shares its DaemonSet's
// namespace) and otherwise from metadata.namespace of its Pod payload, read
// and verified against its digest: one extra read, only for that case. An
// unreadable payload reports the replacement with an unknown namespace
// instead of blocking the deploy that would repair it.
package state
