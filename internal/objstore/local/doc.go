// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package local is the embedded, directory-backed bucket: the object at key
// "a/b/c" is the plain file <dir>/a/b/c, so an operator can browse a local
// bucket with ls and cat. Everything else the store needs (lock files, bucket
// tags, temporary files, and one record per object with its ETag and user
// metadata) lives in the single hidden folder <dir>/.podmin. A directory
// without .podmin is not a bucket (ErrBucketNotFound) until CreateBucket
// adopts it.
//
// The record makes HEAD, conditional writes and ranged reads independent of
// the object's size: it is trusted only while the file keeps the inode,
// size and modification time it was written with, so a file replaced or
// edited by hand is hashed again on its next read. An object's ETag is the
// quoted hex SHA-256 of its content, computed from the bytes the store wrote
// (or hashed, for a file changed behind its back), so a reader that knows
// what digest the content must have can check it without reading the file.
// The store stamps every file it writes with a modification time two
// seconds before the end of the write, which no later edit can reproduce.
//
// Conditional writes and deletes are atomic across processes: each key is
// serialised by flock(2) on a lock file under .podmin/locks, and new content
// becomes visible by rename(2), so readers see either the old or the new
// object, never a partial one.
//
// The package owns the on-disk format of a local bucket and nothing more. It
// must not know what keys mean (internal/state does) and must not grow
// features an S3 bucket lacks, because the conformance suite in
// internal/objstore/objstoretest holds both to the same contract.
package local
