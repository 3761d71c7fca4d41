// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

var (
	// ErrInvalidRange reports a Range that starts beyond the object's end
	// or has a negative offset.
	ErrInvalidRange = errors.New("invalid range")
	// ErrSizeMismatch reports a Write whose body did not hold exactly the
	// announced number of bytes. Nothing was written.
	ErrSizeMismatch = errors.New("body size differs from the announced size")
	// ErrMetadataUnsupported reports user metadata passed to a store that
	// cannot keep it (a Store without a Streamer).
	ErrMetadataUnsupported = errors.New("store does not keep object metadata")
)

// PutOptions are the conditions and metadata of a streamed or buffered write.
type PutOptions struct {
	// IfMatch replaces the object only while its ETag equals it.
	IfMatch string
	// IfAbsent creates the object only when no object exists at the key
	// (If-None-Match: *). It cannot be combined with IfMatch.
	IfAbsent bool
	// Metadata is user metadata kept with the object: keys are [a-z0-9-]
	// (stored as x-amz-meta-<key> on S3), values printable ASCII.
	Metadata map[string]string
}

// Reader streams one object version. Info describes that version: Size is
// the full object size, and with a Range the reader yields only the range.
type Reader struct {
	io.ReadCloser
	Info Info
}

// Streamer is implemented by stores that stream (local, s3store,
// faultstore and the overlay).
type Streamer interface {
	// Open returns a reader for the object (or opts.Range of it).
	// opts.IfNoneMatch equal to the current ETag is ErrNotModified.
	Open(ctx context.Context, key string, opts GetOptions) (*Reader, error)
	// Write stores exactly size bytes read from body under key, with the
	// conditions and metadata of opts, and returns the new ETag. A body
	// that is shorter or longer than size is ErrSizeMismatch, and nothing
	// is written.
	Write(ctx context.Context, key string, body io.Reader, size int64, opts PutOptions) (etag string, err error)
}

// MaxMetadataSize bounds the user metadata of one object, keys and values
// together, as S3 does (2 KiB).
const MaxMetadataSize = 2 << 10

// ValidateMetadata reports why md cannot be stored as user metadata: keys
// must be non-empty and made of a-z, 0-9 and "-", values printable ASCII,
// and everything together at most MaxMetadataSize bytes.
func ValidateMetadata(md map[string]string) error {
	total := 0
	for _, k := range slices.Sorted(maps.Keys(md)) {
		v := md[k]
		if k == "" {
			return errors.New("metadata key is empty")
		}
		for _, r := range k {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("metadata key %q: only a-z, 0-9 and \"-\" are allowed", k)
			}
		}
		for _, r := range v {
			if r < 0x20 || r > 0x7e {
				return fmt.Errorf("metadata %q: value %q: only printable ASCII is allowed", k, v)
			}
		}
		total += len(k) + len(v)
	}
	if total > MaxMetadataSize {
		return fmt.Errorf("metadata is %d bytes: at most %d are allowed", total, MaxMetadataSize)
	}
	return nil
}

// CheckPutOptions reports options that contradict each other or metadata
// that cannot be stored; stores call it before writing.
func CheckPutOptions(opts PutOptions) error {
	if opts.IfAbsent && opts.IfMatch != "" {
		return errors.New("IfAbsent and IfMatch cannot be combined")
	}
	return ValidateMetadata(opts.Metadata)
}

// CheckRange validates r against an object of size bytes and returns the
// offset and length to read.
func CheckRange(r *Range, size int64) (offset, length int64, err error) {
	if r == nil {
		return 0, size, nil
	}
	if r.Offset < 0 || r.Offset > size {
		return 0, 0, fmt.Errorf("range offset %d of a %d byte object: %w", r.Offset, size, ErrInvalidRange)
	}
	length = size - r.Offset
	if r.Length >= 0 && r.Length < length {
		length = r.Length
	}
	return r.Offset, length, nil
}

// OpenObject opens key for streaming: with the store's Streamer when it has
// one, otherwise by reading the whole object with Get.
func OpenObject(ctx context.Context, s Store, key string, opts GetOptions) (*Reader, error) {
	if st, ok := s.(Streamer); ok {
		return st.Open(ctx, key, opts)
	}
	obj, err := s.Get(ctx, key, GetOptions{IfNoneMatch: opts.IfNoneMatch})
	if err != nil {
		return nil, err
	}
	size := int64(len(obj.Data))
	off, n, err := CheckRange(opts.Range, size)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", key, err)
	}
	return &Reader{
		ReadCloser: io.NopCloser(bytes.NewReader(obj.Data[off : off+n])),
		Info:       Info{Key: key, ETag: obj.ETag, Size: size, Metadata: obj.Metadata},
	}, nil
}

// WriteObject writes size bytes from body to key: with the store's
// Streamer when it has one, otherwise buffered through PutIfAbsent,
// PutIfMatch or Put, which cannot keep metadata (ErrMetadataUnsupported).
func WriteObject(ctx context.Context, s Store, key string, body io.Reader, size int64, opts PutOptions) (string, error) {
	if st, ok := s.(Streamer); ok {
		return st.Write(ctx, key, body, size, opts)
	}
	if err := CheckPutOptions(opts); err != nil {
		return "", fmt.Errorf("write %q: %w", key, err)
	}
	if len(opts.Metadata) > 0 {
		return "", fmt.Errorf("write %q: %w", key, ErrMetadataUnsupported)
	}
	data, err := ReadExactly(body, size)
	if err != nil {
		return "", fmt.Errorf("write %q: %w", key, err)
	}
	return putBuffered(ctx, s, key, data, opts)
}

// PutWithOptions writes data to key with opts, keeping metadata when the
// store can.
func PutWithOptions(ctx context.Context, s Store, key string, data []byte, opts PutOptions) (string, error) {
	if st, ok := s.(Streamer); ok {
		return st.Write(ctx, key, bytes.NewReader(data), int64(len(data)), opts)
	}
	if err := CheckPutOptions(opts); err != nil {
		return "", fmt.Errorf("put %q: %w", key, err)
	}
	if len(opts.Metadata) > 0 {
		return "", fmt.Errorf("put %q: %w", key, ErrMetadataUnsupported)
	}
	return putBuffered(ctx, s, key, data, opts)
}

func putBuffered(ctx context.Context, s Store, key string, data []byte, opts PutOptions) (string, error) {
	switch {
	case opts.IfAbsent:
		return s.PutIfAbsent(ctx, key, data)
	case opts.IfMatch != "":
		return s.PutIfMatch(ctx, key, data, opts.IfMatch)
	}
	return s.Put(ctx, key, data)
}

// ReadExactly reads exactly size bytes from body and checks that body ends
// there; otherwise the error wraps ErrSizeMismatch.
func ReadExactly(body io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("negative size %d: %w", size, ErrSizeMismatch)
	}
	var buf bytes.Buffer
	// Grow only as the data arrives: a wrong size must not allocate it.
	n, err := io.Copy(&buf, io.LimitReader(body, size))
	if err != nil {
		return nil, err
	}
	if n < size {
		return nil, fmt.Errorf("body ended after %d of %d bytes: %w", n, size, ErrSizeMismatch)
	}
	if err := ExpectEOF(body, size); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ExpectEOF checks that body holds no byte after the size bytes already
// read from it.
func ExpectEOF(body io.Reader, size int64) error {
	var one [1]byte
	for range 100 {
		n, err := body.Read(one[:])
		if n > 0 {
			return fmt.Errorf("body holds more than %d bytes: %w", size, ErrSizeMismatch)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// CloneMetadata copies md; nil stays nil. Metadata keys are lower-cased,
// as S3 reports them.
func CloneMetadata(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[strings.ToLower(k)] = v
	}
	return out
}

// SameETag compares ETags the way S3 does, ignoring the surrounding quotes.
func SameETag(a, b string) bool {
	return strings.Trim(a, `"`) == strings.Trim(b, `"`)
}
