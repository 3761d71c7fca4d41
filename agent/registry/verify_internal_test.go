// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// verifyingCopy reuses its buffers in turn while the hasher runs behind
// the copy: whatever the body's read sizes, the output is the input byte
// for byte when the digest matches, and all but the held-back last chunk
// when it does not.
func TestVerifyingCopyReusesBuffersSafely(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 4095, 4096, 4097, 5*4096 + 17, 64 * 4096} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		sum := sha256.Sum256(data)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		for _, name := range []string{"whole", "one byte", "half"} {
			var body io.Reader = bytes.NewReader(data)
			switch name {
			case "one byte":
				body = iotest.OneByteReader(body)
			case "half":
				body = iotest.HalfReader(body)
			}
			bufs := [][]byte{make([]byte, 4096), make([]byte, 4096), make([]byte, 4096)}
			var out bytes.Buffer
			if err := verifyingCopy(&out, body, int64(size), digest, bufs); err != nil {
				t.Fatalf("%d bytes, %s reads: %v", size, name, err)
			}
			if !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("%d bytes, %s reads: output differs from the input", size, name)
			}
		}
		if size == 0 {
			continue
		}
		bad := bytes.Clone(data)
		bad[rng.IntN(size)] ^= 0x80
		bufs := [][]byte{make([]byte, 4096), make([]byte, 4096)}
		var out bytes.Buffer
		err := verifyingCopy(&out, bytes.NewReader(bad), int64(size), digest, bufs)
		if !errors.Is(err, errDigestMismatch) {
			t.Fatalf("%d bytes with a flipped bit: %v, want a digest mismatch", size, err)
		}
		last := size % 4096
		if last == 0 {
			last = 4096
		}
		if out.Len() != size-last || !bytes.Equal(out.Bytes(), bad[:size-last]) {
			t.Fatalf("%d bytes with a flipped bit: wrote %d bytes, want all but the last chunk (%d)", size, out.Len(), size-last)
		}
	}
}
