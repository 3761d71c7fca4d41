// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/objstore"
)

// ErrDigestMismatch reports blob content that does not hash to the digest
// naming it, or does not have its descriptor's size.
var ErrDigestMismatch = errors.New("content does not match its digest and size")

// BlobOpener is a Source that streams: Push and ReadManifest use it instead
// of Blob when a Source has it, so no blob is held in memory whole.
type BlobOpener interface {
	// OpenBlob returns a reader of the blob's content and its size.
	OpenBlob(ctx context.Context, digest v1.Hash) (io.ReadCloser, int64, error)
}

// VerifyingReader returns a reader of r that fails with ErrDigestMismatch
// unless r yields exactly d.Size bytes hashing to d.Digest. The check is
// made when the last byte arrives and that read's bytes are held back on a
// mismatch, so a consumer that stops at d.Size bytes never receives a
// complete wrong blob. It reads at most one byte beyond d.Size.
func VerifyingReader(r io.Reader, d v1.Descriptor) io.Reader {
	return &verifyingReader{r: r, h: sha256.New(), d: d}
}

type verifyingReader struct {
	r   io.Reader
	h   hash.Hash
	d   v1.Descriptor
	n   int64
	err error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.d.Digest.Algorithm != "sha256" {
		v.err = fmt.Errorf("blob %s: only sha256 digests are supported", v.d.Digest)
		return 0, v.err
	}
	if rem := v.d.Size - v.n; int64(len(p)) > rem+1 {
		p = p[:rem+1]
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case v.n > v.d.Size:
		v.err = fmt.Errorf("blob %s holds more than %d bytes: %w: pull or build the image again", v.d.Digest, v.d.Size, ErrDigestMismatch)
		return 0, v.err
	case v.n == v.d.Size && (n > 0 || errors.Is(err, io.EOF)):
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.d.Digest.Hex {
			v.err = fmt.Errorf("blob %s hashes to sha256:%s: %w: pull or build the image again", v.d.Digest, got, ErrDigestMismatch)
			return 0, v.err
		}
	case v.n < v.d.Size && errors.Is(err, io.EOF):
		v.err = fmt.Errorf("blob %s ended after %d of %d bytes: %w: pull or build the image again", v.d.Digest, v.n, v.d.Size, ErrDigestMismatch)
		return 0, v.err
	}
	if err != nil && !errors.Is(err, io.EOF) {
		v.err = err
	}
	return n, err
}

// readLimited reads all of r, failing as soon as more than limit bytes
// arrive: an oversized object costs at most limit+1 bytes of memory.
func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is more than the %d byte limit", what, limit)
	}
	return data, nil
}

// ReadObject reads a small object (index.json, a manifest) of at most
// limit bytes with its ETag. An object whose size is above the limit is
// refused before anything is read, and a read stops one byte past the
// limit, so a store that reports a wrong size costs no more.
func ReadObject(ctx context.Context, s objstore.Store, key string, limit int64) ([]byte, string, error) {
	r, err := objstore.OpenObject(ctx, s, key, objstore.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	if r.Info.Size > limit {
		return nil, "", fmt.Errorf("%s is %d bytes, more than the %d byte limit", key, r.Info.Size, limit)
	}
	data, err := readLimited(r, limit, key)
	if err != nil {
		return nil, "", err
	}
	return data, r.Info.ETag, nil
}

// verifyChunk is the unit a prefetching verifier reads, hashes and hands
// on; verifyChunks of them are in flight at most.
const (
	verifyChunk  = 1 << 20
	verifyChunks = 4
)

// PrefetchingVerifier is VerifyingReader with the reading and hashing done
// ahead in a goroutine, so verification overlaps what the consumer does
// with the bytes (a store hashing and writing them) instead of adding to
// it. It holds at most 4 MiB. The last chunk is handed on only after the
// whole blob matched d. Close stops the goroutine and closes r.
func PrefetchingVerifier(r io.ReadCloser, d v1.Descriptor) io.ReadCloser {
	p := &prefetcher{
		src:  r,
		full: make(chan prefetched, verifyChunks),
		free: make(chan []byte, verifyChunks),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range verifyChunks {
		p.free <- nil // allocated on first use, so a small blob costs little
	}
	go p.run(d)
	return p
}

type prefetched struct {
	buf []byte
	n   int
	err error // the terminal error (io.EOF after the last chunk)
}

type prefetcher struct {
	src        io.ReadCloser
	full       chan prefetched
	free       chan []byte
	stop, done chan struct{}
	closeOnce  sync.Once
	cur        prefetched
	off        int
	err        error
}

func (p *prefetcher) run(d v1.Descriptor) {
	defer close(p.done)
	send := func(c prefetched) bool {
		select {
		case p.full <- c:
			return true
		case <-p.stop:
			return false
		}
	}
	fail := func(err error) { send(prefetched{err: err}) }
	if d.Digest.Algorithm != "sha256" {
		fail(fmt.Errorf("blob %s: only sha256 digests are supported", d.Digest))
		return
	}
	h := sha256.New()
	var total int64
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.stop:
			return
		}
		if buf == nil {
			buf = make([]byte, verifyChunk)
		}
		// Read at most one byte past the announced size.
		want := int64(len(buf))
		if rem := d.Size - total; want > rem+1 {
			want = rem + 1
		}
		n, err := io.ReadFull(p.src, buf[:want])
		h.Write(buf[:n])
		total += int64(n)
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		switch {
		case err != nil && !end:
			fail(err)
			return
		case total > d.Size:
			fail(fmt.Errorf("blob %s holds more than %d bytes: %w: pull or build the image again", d.Digest, d.Size, ErrDigestMismatch))
			return
		case end && total < d.Size:
			fail(fmt.Errorf("blob %s ended after %d of %d bytes: %w: pull or build the image again", d.Digest, total, d.Size, ErrDigestMismatch))
			return
		}
		if total == d.Size && (n > 0 || end) {
			// The last chunk goes out only once the whole blob matched.
			if got := hex.EncodeToString(h.Sum(nil)); got != d.Digest.Hex {
				fail(fmt.Errorf("blob %s hashes to sha256:%s: %w: pull or build the image again", d.Digest, got, ErrDigestMismatch))
				return
			}
		}
		c := prefetched{buf: buf, n: n}
		if end {
			c.err = io.EOF
		}
		if !send(c) || end {
			return
		}
	}
}

func (p *prefetcher) Read(b []byte) (int, error) {
	for p.off == p.cur.n {
		if p.err != nil {
			return 0, p.err
		}
		if p.cur.buf != nil {
			p.free <- p.cur.buf
		}
		p.cur, p.off = <-p.full, 0
		p.err = p.cur.err
	}
	n := copy(b, p.cur.buf[p.off:p.cur.n])
	p.off += n
	return n, nil
}

func (p *prefetcher) Close() error {
	p.closeOnce.Do(func() { close(p.stop) })
	<-p.done
	return p.src.Close()
}
