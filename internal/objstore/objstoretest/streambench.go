// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// streamBenchSize is the large object of the streaming benchmarks.
const streamBenchSize = 64 << 20

// sourceFile writes size random bytes to a file in a fresh directory and
// returns it open at offset 0.
func sourceFile(b *testing.B, size int64) *os.File {
	b.Helper()
	f, err := os.Create(filepath.Join(b.TempDir(), "source"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	return f
}

// RunStreamBenchmarks measures streamed writes and reads of a 64 MiB
// object, and HEAD and a 100-byte ranged read on 1 KiB, 64 MiB and 256 MiB
// objects (which should cost the same). Compare with RunCopyBaseline.
func RunStreamBenchmarks(b *testing.B, newStore func(b *testing.B) objstore.Store) {
	// 64 MiB is one PutObject on S3, 256 MiB a multipart upload.
	for _, size := range []struct {
		name string
		n    int64
	}{{"64MiB", streamBenchSize}, {"256MiB", 256 << 20}} {
		b.Run("Write"+size.name, func(b *testing.B) {
			s := newStore(b)
			src := sourceFile(b, size.n)
			b.SetBytes(size.n)
			for b.Loop() {
				if _, err := src.Seek(0, io.SeekStart); err != nil {
					b.Fatal(err)
				}
				if _, err := objstore.WriteObject(b.Context(), s, "bench/stream", src, size.n, objstore.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("Open64MiB", func(b *testing.B) {
		s := newStore(b)
		src := sourceFile(b, streamBenchSize)
		if _, err := objstore.WriteObject(b.Context(), s, "bench/stream", src, streamBenchSize, objstore.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 256<<10)
		b.SetBytes(streamBenchSize)
		for b.Loop() {
			r, err := objstore.OpenObject(b.Context(), s, "bench/stream", objstore.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
			r.Close()
			if err != nil || n != streamBenchSize {
				b.Fatalf("read %d bytes, %v", n, err)
			}
		}
	})
	for _, size := range []struct {
		name string
		n    int64
	}{{"1KiB", 1 << 10}, {"64MiB", streamBenchSize}, {"256MiB", 256 << 20}} {
		b.Run("Head"+size.name, func(b *testing.B) {
			s := newStore(b)
			if _, err := objstore.WriteObject(b.Context(), s, "bench/obj", sourceFile(b, size.n), size.n, objstore.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.Head(b.Context(), "bench/obj"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Range100B"+size.name, func(b *testing.B) {
			s := newStore(b)
			if _, err := objstore.WriteObject(b.Context(), s, "bench/obj", sourceFile(b, size.n), size.n, objstore.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 100)
			rng := &objstore.Range{Offset: size.n / 2, Length: 100}
			for b.Loop() {
				r, err := objstore.OpenObject(b.Context(), s, "bench/obj", objstore.GetOptions{Range: rng})
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.ReadFull(r, buf)
				r.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// RunCopyBaseline measures what the streaming benchmarks compare with: a
// plain io.Copy of the same 64 MiB file into a new synced file, and from
// the file into io.Discard.
func RunCopyBaseline(b *testing.B) {
	copyFile := func(b *testing.B, copyFn func(dst *os.File, src *os.File) error) {
		src := sourceFile(b, streamBenchSize)
		dir := b.TempDir()
		b.SetBytes(streamBenchSize)
		for b.Loop() {
			if _, err := src.Seek(0, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			dst, err := os.CreateTemp(dir, "copy-*")
			if err != nil {
				b.Fatal(err)
			}
			err = copyFn(dst, src)
			if err == nil {
				err = dst.Sync()
			}
			dst.Close()
			os.Remove(dst.Name())
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	// Through user space, as a store must copy to hash.
	b.Run("CopyFileUserspace64MiB", func(b *testing.B) {
		copyFile(b, func(dst, src *os.File) error {
			_, err := io.Copy(struct{ io.Writer }{dst}, struct{ io.Reader }{src})
			return err
		})
	})
	// Through user space and SHA-256: what any digesting write costs.
	b.Run("CopyFileSHA256_64MiB", func(b *testing.B) {
		copyFile(b, func(dst, src *os.File) error {
			_, err := io.Copy(io.MultiWriter(dst, sha256.New()), struct{ io.Reader }{src})
			return err
		})
	})
	// With *os.File on both sides io.Copy may copy in the kernel.
	b.Run("CopyFile64MiB", func(b *testing.B) {
		copyFile(b, func(dst, src *os.File) error {
			_, err := io.Copy(dst, src)
			return err
		})
	})
	b.Run("ReadFile64MiB", func(b *testing.B) {
		src := sourceFile(b, streamBenchSize)
		b.SetBytes(streamBenchSize)
		for b.Loop() {
			if _, err := src.Seek(0, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, src); err != nil {
				b.Fatal(err)
			}
		}
	})
}
