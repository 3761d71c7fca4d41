// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"testing"
	"testing/iotest"
	"time"

	"podmin.dev/podmin/internal/objstore"
)

// StreamSize is the size of the objects the streaming cases write: large
// enough for a multipart upload when a test lowers the threshold.
const StreamSize = 12<<20 + 12345

// streamTests are the streaming cases of the suite.
var streamTests = []struct {
	name string
	fn   func(t *testing.T, s objstore.Store)
}{
	{"StreamWriteOpen", testStreamWriteOpen},
	{"StreamOpenRange", testStreamOpenRange},
	{"StreamOpenIfNoneMatch", testStreamOpenIfNoneMatch},
	{"StreamSizeMismatch", testStreamSizeMismatch},
	{"StreamConditional", testStreamConditional},
	{"StreamCancelled", testStreamCancelled},
}

// RunStreaming runs only the streaming cases, for stores configured to
// take another path for large objects (multipart uploads).
func RunStreaming(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	for _, tc := range streamTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// pattern returns n bytes that differ with seed and position.
func pattern(n int, seed byte) []byte {
	data := make([]byte, n)
	x := uint32(seed) + 1
	for i := range data {
		x = x*1664525 + 1013904223
		data[i] = byte(x >> 24)
	}
	return data
}

// bodies are the shapes of body a Write gets: seekable ones are sent as
// they are, others streamed.
var bodies = []struct {
	name string
	wrap func([]byte) io.Reader
}{
	{"seekable", func(b []byte) io.Reader { return bytes.NewReader(b) }},
	{"stream", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
}

// readAll opens key (with r) and returns the bytes and the reader's Info.
func readAll(t *testing.T, s objstore.Store, key string, r *objstore.Range) ([]byte, objstore.Info) {
	t.Helper()
	rd, err := objstore.OpenObject(t.Context(), s, key, objstore.GetOptions{Range: r})
	if err != nil {
		t.Fatalf("OpenObject(%q, %+v): %v", key, r, err)
	}
	defer rd.Close()
	data, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return data, rd.Info
}

func testStreamWriteOpen(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	keeps := keepsMetadata(t, s)
	for i, body := range bodies {
		t.Run(body.name, func(t *testing.T) {
			data := pattern(StreamSize, byte(i))
			md := metadataIf(keeps, map[string]string{"digest": "sha256-test", "part": body.name})
			key := "stream/" + body.name
			etag, err := objstore.WriteObject(ctx, s, key, body.wrap(data), int64(len(data)), objstore.PutOptions{Metadata: md})
			if err != nil {
				t.Fatalf("WriteObject: %v", err)
			}
			got, info := readAll(t, s, key, nil)
			if !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes that differ from the %d written", len(got), len(data))
			}
			if info.ETag != etag || info.Size != int64(len(data)) || !maps.Equal(info.Metadata, md) {
				t.Errorf("Open Info = %s %d %v, want %s %d %v", info.ETag, info.Size, info.Metadata, etag, len(data), md)
			}
			head, err := s.Head(ctx, key)
			if err != nil || head.ETag != etag || head.Size != int64(len(data)) {
				t.Errorf("Head = %+v, %v; want ETag %s, size %d", head, err, etag, len(data))
			}
		})
	}
	// An empty object streams too.
	etag, err := objstore.WriteObject(ctx, s, "stream/empty", bytes.NewReader(nil), 0, objstore.PutOptions{})
	if err != nil {
		t.Fatalf("WriteObject(empty): %v", err)
	}
	if got, info := readAll(t, s, "stream/empty", nil); len(got) != 0 || info.ETag != etag || info.Size != 0 {
		t.Errorf("empty object read as %d bytes, %+v", len(got), info)
	}
}

func testStreamOpenRange(t *testing.T, s objstore.Store) {
	const size = 1000
	data := pattern(size, 7)
	etag := mustPut(t, s, "ranged", data)
	for _, tc := range []struct {
		name        string
		r           objstore.Range
		from, until int
	}{
		{"whole", objstore.Range{Offset: 0, Length: -1}, 0, size},
		{"head", objstore.Range{Offset: 0, Length: 100}, 0, 100},
		{"middle", objstore.Range{Offset: 450, Length: 100}, 450, 550},
		{"tail", objstore.Range{Offset: 900, Length: -1}, 900, size},
		{"cut at the end", objstore.Range{Offset: 900, Length: 500}, 900, size},
		{"last byte", objstore.Range{Offset: size - 1, Length: 1}, size - 1, size},
		{"zero length", objstore.Range{Offset: 10, Length: 0}, 10, 10},
		{"at the end", objstore.Range{Offset: size, Length: -1}, size, size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, info := readAll(t, s, "ranged", &tc.r)
			if !bytes.Equal(got, data[tc.from:tc.until]) {
				t.Errorf("range %+v read %d bytes, want bytes [%d, %d)", tc.r, len(got), tc.from, tc.until)
			}
			if info.Size != size || info.ETag != etag {
				t.Errorf("range %+v Info = size %d ETag %s, want the whole object's %d %s", tc.r, info.Size, info.ETag, size, etag)
			}
		})
	}
	for _, r := range []objstore.Range{{Offset: size + 1, Length: -1}, {Offset: -1, Length: 10}} {
		rd, err := objstore.OpenObject(t.Context(), s, "ranged", objstore.GetOptions{Range: &r})
		if err == nil {
			rd.Close()
		}
		if !errors.Is(err, objstore.ErrInvalidRange) {
			t.Errorf("range %+v error = %v, want ErrInvalidRange", r, err)
		}
	}
	rd, err := objstore.OpenObject(t.Context(), s, "missing", objstore.GetOptions{Range: &objstore.Range{Offset: 1, Length: 1}})
	if err == nil {
		rd.Close()
	}
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("ranged open of a missing key error = %v, want ErrNotFound", err)
	}
}

func testStreamOpenIfNoneMatch(t *testing.T, s objstore.Store) {
	etag := mustPut(t, s, "k", []byte("v1"))
	for _, r := range []*objstore.Range{nil, {Offset: 0, Length: 1}} {
		rd, err := objstore.OpenObject(t.Context(), s, "k", objstore.GetOptions{IfNoneMatch: etag, Range: r})
		if err == nil {
			rd.Close()
		}
		if !errors.Is(err, objstore.ErrNotModified) {
			t.Errorf("Open(IfNoneMatch: current, range %+v) error = %v, want ErrNotModified", r, err)
		}
	}
	if got, _ := readAll(t, s, "k", nil); string(got) != "v1" {
		t.Errorf("Open = %q, want v1", got)
	}
}

func testStreamSizeMismatch(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	data := pattern(StreamSize, 3)
	old := mustPut(t, s, "kept", []byte("old content"))
	for _, body := range bodies {
		for _, tc := range []struct {
			name string
			body []byte
		}{
			{"short", data[:len(data)-1]},
			{"long", append(bytes.Clone(data), 'x')},
			{"much shorter", data[:100]},
		} {
			for _, key := range []string{"kept", "absent"} {
				_, err := objstore.WriteObject(ctx, s, key, body.wrap(tc.body), int64(len(data)), objstore.PutOptions{})
				if !errors.Is(err, objstore.ErrSizeMismatch) {
					t.Errorf("%s %s body for %s: error = %v, want ErrSizeMismatch", body.name, tc.name, key, err)
				}
			}
		}
	}
	checkObject(t, s, "kept", []byte("old content"), old)
	if _, err := s.Head(ctx, "absent"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("after failed writes, Head(absent) error = %v, want ErrNotFound", err)
	}
	page, err := s.List(ctx, "", objstore.ListOptions{})
	if err != nil || len(page.Objects) != 1 {
		t.Errorf("List after failed writes = %+v, %v; want only the kept object", page.Objects, err)
	}
}

func testStreamConditional(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	keeps := keepsMetadata(t, s)
	version := func(v string) map[string]string { return metadataIf(keeps, map[string]string{"v": v}) }
	for i, body := range bodies {
		t.Run(body.name, func(t *testing.T) {
			key := "cond/" + body.name
			v1, v2 := pattern(StreamSize, byte(10+i)), pattern(StreamSize, byte(20+i))
			etag1, err := objstore.WriteObject(ctx, s, key, body.wrap(v1), int64(len(v1)), objstore.PutOptions{IfAbsent: true, Metadata: version("1")})
			if err != nil {
				t.Fatalf("create-only WriteObject: %v", err)
			}
			_, err = objstore.WriteObject(ctx, s, key, body.wrap(v2), int64(len(v2)), objstore.PutOptions{IfAbsent: true})
			if !errors.Is(err, objstore.ErrPrecondition) {
				t.Fatalf("second create-only WriteObject error = %v, want ErrPrecondition", err)
			}
			_, err = objstore.WriteObject(ctx, s, key, body.wrap(v2), int64(len(v2)), objstore.PutOptions{IfMatch: `"0123456789abcdef0123456789abcdef"`})
			if !errors.Is(err, objstore.ErrPrecondition) {
				t.Fatalf("WriteObject with a stale If-Match error = %v, want ErrPrecondition", err)
			}
			got, info := readAll(t, s, key, nil)
			if !bytes.Equal(got, v1) || info.ETag != etag1 || !maps.Equal(info.Metadata, version("1")) {
				t.Fatalf("after refused writes the object is not the first version (ETag %s, metadata %v)", info.ETag, info.Metadata)
			}
			etag2, err := objstore.WriteObject(ctx, s, key, body.wrap(v2), int64(len(v2)), objstore.PutOptions{IfMatch: etag1, Metadata: version("2")})
			if err != nil {
				t.Fatalf("WriteObject with the current If-Match: %v", err)
			}
			got, info = readAll(t, s, key, nil)
			if !bytes.Equal(got, v2) || info.ETag != etag2 || !maps.Equal(info.Metadata, version("2")) {
				t.Fatalf("after the If-Match write the object is not the second version (ETag %s, metadata %v)", info.ETag, info.Metadata)
			}
		})
	}
	_, err := objstore.WriteObject(ctx, s, "cond/never", bytes.NewReader([]byte("x")), 1, objstore.PutOptions{IfMatch: `"0123456789abcdef0123456789abcdef"`})
	if !errors.Is(err, objstore.ErrNotFound) && !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("If-Match WriteObject of a missing key error = %v, want ErrNotFound or ErrPrecondition", err)
	}
}

// cancelAfter cancels a context once n bytes were read through it.
type cancelAfter struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
		// Give the transport a moment to notice, as a real stall would.
		time.Sleep(10 * time.Millisecond)
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

func testStreamCancelled(t *testing.T, s objstore.Store) {
	data := pattern(StreamSize, 5)
	for _, body := range bodies {
		if body.name == "seekable" {
			continue // a seekable body may be sent before Read sees the cancel
		}
		ctx, cancel := context.WithCancel(t.Context())
		r := &cancelAfter{r: body.wrap(data), n: StreamSize / 2, cancel: cancel}
		_, err := objstore.WriteObject(ctx, s, "cancelled", r, int64(len(data)), objstore.PutOptions{})
		cancel()
		if err == nil {
			t.Fatalf("%s: WriteObject cancelled halfway succeeded", body.name)
		}
		if _, err := s.Head(t.Context(), "cancelled"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("%s: after a cancelled write, Head error = %v, want ErrNotFound", body.name, err)
		}
	}
}
