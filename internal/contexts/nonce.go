// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package contexts

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
)

// BucketNonceTag is the bucket tag holding the nonce connect drew just
// before it created the bucket. Together with Context.BucketNonce it proves
// that Podmin created the bucket for this context; a name or a
// podmin:cluster tag proves nothing, as anyone can copy them.
const BucketNonceTag = "podmin:create-nonce"

// NonceBytes is the size of a nonce before hex encoding.
const NonceBytes = 32

// NewNonce returns a fresh, unpredictable 32-byte nonce in lowercase hex.
func NewNonce() string {
	b := make([]byte, NonceBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it aborts the process instead)
	return hex.EncodeToString(b)
}

// ProvenBy reports whether got is the nonce want records: both are
// well-formed and equal. An empty or malformed nonce proves nothing.
func ProvenBy(want, got string) bool {
	return validNonce(want) && validNonce(got) && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

func validNonce(s string) bool {
	if len(s) != 2*NonceBytes {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
