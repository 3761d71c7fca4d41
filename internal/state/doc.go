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
// already equals the target is Unchanged after that one request: no payload
// is touched. Otherwise every payload the index does not reference yet is
// written create-only (an existing object is verified; one whose bytes do
// not match its name is replaced with a write conditional on its ETag and
// reported), and the index is written back with If-Match (create-only when
// it does not exist yet). Payloads the index references exist by
// construction: they were written before the index named them and are never
// deleted. A mutation that changes nothing writes nothing. A lost race
// re-reads and re-applies, with bounded, jittered exponential backoff. The
// rules (one owner per Service identity) are checked inside the mutation,
// against the version being replaced, so they hold under races.
//
// # Write IDs
//
// Every index write carries a fresh random write ID in the object's
// metadata (WriteIDMeta), together with the IDs of the versions before it
// (WriteChainMeta, newest first, bounded). The body stays exactly the
// specification's format. Because every write is conditional on the
// version it read, the versions form one chain and a write that landed is
// the direct successor of its base.
//
// A write that fails any other way than a refused condition is ambiguous:
// the store may have applied it. The committer re-reads the index at once
// and resolves it by the write IDs alone, never by comparing content: its
// own ID in the chain means it landed (perhaps built upon since) and the
// operation succeeds with the outcome computed against its base; its base's
// ID in the chain without its own means it did not land, and the mutation
// is applied again to the fresh index. If more writes followed than the
// chain records, the operation fails with ErrOutcomeUnknown and tells the
// operator to check with "podmin list". A same-key writer that restores the
// pre-image inside the window has its own ID, so it can neither pass for
// this write nor hide it: no operation is applied twice. When the attempts
// run out right after an ambiguous write, one more read resolves it.
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
package state
