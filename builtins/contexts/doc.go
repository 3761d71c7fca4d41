// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package contexts is the contexts family: connect (create or prove the
// cluster bucket and save its context), use, list and disconnect. It owns
// the bucket ownership proof (the podmin:cluster tag and the create nonce)
// and refuses a bucket of another cluster (ErrForeignBucket) or a silent
// change of a context's bucket (ErrWouldReplace).
//
// It reaches its surroundings only through openv.Env; it must not import
// builtins or another family, starlark or cmd, print, prompt or parse
// flags.
package contexts
