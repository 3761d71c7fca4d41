// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/oci"
)

// errDigestMismatch reports object bytes that do not hash to the digest
// naming them.
var errDigestMismatch = errors.New("content does not match its digest")

// badBlobs remembers blobs that failed verification, by object key and
// the version (ETag, size and modification time) that failed, so they
// are refused at once, for HEAD as for GET, until the object changes. A
// blob written again with the same bytes under the same ETag (an S3 ETag
// is the MD5 of the upload) is a new version by its modification time.
// It is bounded; the oldest entry goes first.
type badBlobs struct {
	mu    sync.Mutex
	max   int
	order []string
	bad   map[string]objstore.Info
}

func newBadBlobs(max int) *badBlobs { return &badBlobs{max: max, bad: map[string]objstore.Info{}} }

func (b *badBlobs) mark(key string, info objstore.Info) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.bad[key]; !ok {
		if len(b.order) >= b.max {
			delete(b.bad, b.order[0])
			b.order = b.order[1:]
		}
		b.order = append(b.order, key)
	}
	b.bad[key] = info
}

// is reports whether this version of key failed verification; a changed
// object is forgotten and verified again.
func (b *badBlobs) is(key string, info objstore.Info) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	prev, ok := b.bad[key]
	if !ok {
		return false
	}
	if sameVersion(prev, info) {
		return true
	}
	delete(b.bad, key)
	for i, k := range b.order {
		if k == key {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
	return false
}

// goodBlobs remembers the versions of blobs that were streamed completely
// and matched their digest, so later complete reads of the same version
// (same ETag, size and modification time) are served without hashing
// again, at the speed of the storage. It is bounded; when full it forgets
// everything and verifies afresh.
type goodBlobs struct {
	mu   sync.Mutex
	max  int
	good map[string]objstore.Info
}

func newGoodBlobs(max int) *goodBlobs { return &goodBlobs{max: max, good: map[string]objstore.Info{}} }

func (g *goodBlobs) mark(key string, info objstore.Info) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.good) >= g.max {
		clear(g.good)
	}
	g.good[key] = info
}

func (g *goodBlobs) is(key string, info objstore.Info) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev, ok := g.good[key]
	return ok && sameVersion(prev, info)
}

// sameVersion reports whether two descriptions are of one version of an
// object: same ETag, size and modification time.
func sameVersion(a, b objstore.Info) bool {
	return a.ETag == b.ETag && a.Size == b.Size && a.LastModified.Equal(b.LastModified)
}

func (g *goodBlobs) forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.good, key)
}

// readManifest reads the manifest blob d names, never more than d.Size+1
// bytes, and verifies its size and digest.
func (h *Handler) readManifest(ctx context.Context, key string, d v1.Descriptor) ([]byte, error) {
	body, err := h.objects.Open(ctx, key, 0, d.Size+1)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	// One buffer of exactly the size it may need: the read stops one
	// byte past the descriptor's size, and nothing grows by doubling.
	data := make([]byte, d.Size+1)
	n, err := io.ReadFull(body, data)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	data = data[:n]
	if int64(len(data)) != d.Size {
		return nil, fmt.Errorf("%w: %s is not %d bytes long as its descriptor says", errDigestMismatch, key, d.Size)
	}
	if err := oci.Verify(data, d); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errDigestMismatch, key, err)
	}
	return data, nil
}

// verifyingCopy streams body (size bytes of the blob digest names) to w,
// always holding back the last chunk read: only when the whole blob has
// hashed to its digest is that chunk written, so a client never receives
// a complete response with the wrong bytes. On a mismatch it returns
// errDigestMismatch without writing the held-back chunk.
//
// Hashing runs in its own goroutine, a few chunks behind the copy, so a
// response costs about the slower of hashing and copying rather than
// their sum. bufs (at least two, of equal size) are used in turn: a
// chunk's buffer is reused only once the chunk is both hashed and written.
func verifyingCopy(w io.Writer, body io.Reader, size int64, digest string, bufs [][]byte) error {
	var h hash.Hash = sha256.New()
	toHash := make(chan []byte, len(bufs))
	hashed := make(chan struct{}, len(bufs))
	go func() {
		defer close(hashed)
		for c := range toHash {
			h.Write(c)
			hashed <- struct{}{}
		}
	}()
	// finish stops the hasher and waits until it has let go of every
	// buffer, so they can go back to the pool.
	finish := func() {
		close(toHash)
		for range hashed {
		}
	}
	var total int64
	var held []byte
	acked := 0
	for i := 0; ; i++ {
		// The buffer of chunk i last held chunk i-len(bufs), which was
		// written when chunk i-len(bufs)+1 was read; wait until it is
		// hashed too.
		for ; acked < i-len(bufs)+1; acked++ {
			<-hashed
		}
		next := bufs[i%len(bufs)]
		n, err := io.ReadFull(body, next)
		if n > 0 {
			toHash <- next[:n]
			if len(held) > 0 {
				if _, werr := w.Write(held); werr != nil {
					finish()
					return werr
				}
			}
			total += int64(n)
			held = next[:n]
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			finish()
			return err
		}
	}
	finish()
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest || total != size {
		return fmt.Errorf("%w: %d bytes hashing to %s", errDigestMismatch, total, got)
	}
	_, err := w.Write(held)
	return err
}

// abort ends a response whose status is already sent without completing
// it: the client sees a truncated body, never a complete wrong one.
func abort() { panic(http.ErrAbortHandler) }
