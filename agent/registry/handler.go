// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/state"
)

// Handler serves the read-only OCI distribution API. It is safe for
// concurrent use.
type Handler struct {
	objects Objects
	log     *slog.Logger
	cache   *indexCache
	bad     *badBlobs
	good    *goodBlobs
	bufs    sync.Pool
	// manifests bounds the manifest bytes buffered at once.
	manifests *budget
	stats     stats
}

// Option configures New.
type Option func(*Handler)

// WithLogger sets the logger for storage failures (default: discard).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithIndexCacheSize bounds how many repositories' index.json stay cached
// (default 256).
func WithIndexCacheSize(n int) Option { return func(h *Handler) { h.cache.max = max(n, 1) } }

// WithManifestMemory bounds the bytes of manifests held in memory at once
// by concurrent requests (default DefaultManifestMemory). A manifest is
// read and verified whole before any of it is sent, so HEAD and GET
// answer alike; requests beyond the bound wait for their turn, and a
// manifest larger than the bound is read alone.
func WithManifestMemory(n int64) Option {
	return func(h *Handler) { h.manifests = newBudget(max(n, 1)) }
}

// DefaultManifestMemory is the default bound of WithManifestMemory: four
// manifests of the largest size served.
const DefaultManifestMemory = 4 * (oci.MaxManifestSize + 1)

// manifestWriteTimeout bounds sending one manifest, so a client that
// stops reading cannot hold its share of the manifest memory for long.
const manifestWriteTimeout = time.Minute

// copyBufferSize is the size of each streaming buffer of a blob response;
// a response being verified uses verifyBuffers of them, so hashing can run
// a few chunks behind the copy.
const (
	copyBufferSize = 256 << 10
	verifyBuffers  = 4
)

// New returns a handler reading from objects.
func New(objects Objects, opts ...Option) *Handler {
	h := &Handler{
		objects: objects,
		log:     slog.New(slog.DiscardHandler),
		cache:   &indexCache{max: 256, entries: map[string]cachedIndex{}},
		bad:     newBadBlobs(1024),
		good:    newGoodBlobs(4096),

		manifests: newBudget(DefaultManifestMemory),
	}
	h.bufs.New = func() any { b := make([]byte, copyBufferSize); return &b }
	for _, opt := range opts {
		opt(h)
	}
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, aerr := parseRoute(r)
	if aerr == nil {
		switch rt.kind {
		case kindBase:
			w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
			w.Header().Set("Content-Type", "application/json")
			if r.Method == http.MethodGet {
				_, _ = io.WriteString(w, "{}")
			}
			return
		case kindManifest:
			aerr = h.manifest(w, r, rt)
		case kindBlob:
			aerr = h.blob(w, r, rt)
		}
	}
	if aerr != nil {
		h.stats.refused(refusalOf(aerr))
		writeError(w, r, aerr)
	}
}

// storageError turns a failed read into a 500, logging the cause.
func (h *Handler) storageError(ctx context.Context, what string, err error) *apiError {
	h.log.ErrorContext(ctx, "registry read failed", "object", what, "err", err)
	return errorf(http.StatusInternalServerError, CodeUnknown, "reading "+what+" from the cluster bucket failed")
}

func (h *Handler) manifest(w http.ResponseWriter, r *http.Request, rt route) *apiError {
	ctx := r.Context()
	idx, err := h.index(ctx, rt.layout)
	if errors.Is(err, objstore.ErrNotFound) {
		return errorf(http.StatusNotFound, CodeNameUnknown, "repository "+quote(rt.name)+" has no images: push one with podmin push")
	}
	if err != nil {
		return h.storageError(ctx, rt.layout.IndexFile(), err)
	}
	var d v1.Descriptor
	var ok bool
	if rt.tag != "" {
		d, ok = oci.FindTag(idx, rt.tag)
	} else if hash, err := v1.NewHash(rt.digest); err == nil {
		d, ok = oci.FindDigest(idx, hash)
	}
	if !ok || (!d.MediaType.IsIndex() && !d.MediaType.IsImage()) {
		return errorf(http.StatusNotFound, CodeManifestUnknown, "manifest "+quote(rt.tag+rt.digest)+" is not in "+quote(rt.name))
	}
	if d.Size > oci.MaxManifestSize || d.Size < 0 {
		return h.storageError(ctx, rt.layout.IndexFile(), errors.New("manifest descriptor size out of bounds"))
	}
	key, err := rt.layout.BlobPath(d.Digest.String())
	if err != nil {
		return errorf(http.StatusNotFound, CodeManifestUnknown, "manifest "+quote(d.Digest.String())+" is not a sha256 digest")
	}
	// HEAD reads and verifies the manifest too, so that it answers
	// exactly as GET would. The buffer's share of the manifest memory is
	// held until the response is sent.
	share, err := h.manifests.take(ctx, d.Size+1)
	if err != nil {
		// The client went away while the request waited its turn.
		return errorf(http.StatusServiceUnavailable, CodeUnknown, "the request ended while waiting to read manifest "+quote(d.Digest.String())).because(refusedCancelled)
	}
	defer h.manifests.give(share)
	data, err := h.readManifest(ctx, key, d)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return errorf(http.StatusNotFound, CodeManifestUnknown, "manifest "+quote(d.Digest.String())+" is listed but its blob is missing: push the image again")
	case errors.Is(err, errDigestMismatch):
		h.log.ErrorContext(ctx, "registry refused a manifest that fails verification", "object", key, "digest", d.Digest.String(), "err", err)
		return errorf(http.StatusInternalServerError, CodeUnknown, "manifest "+quote(d.Digest.String())+" in the cluster bucket does not match its digest: push the image again").because(refusedDigestMismatch)
	case err != nil:
		return h.storageError(ctx, key, err)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", string(d.MediaType))
	hdr.Set("Docker-Content-Digest", d.Digest.String())
	hdr.Set("Content-Length", strconv.FormatInt(d.Size, 10))
	hdr.Set("ETag", `"`+d.Digest.String()+`"`)
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(manifestWriteTimeout))
	_, _ = countingWriter{w: w, n: &h.stats.manifestBytes}.Write(data)
	return nil
}

func (h *Handler) blob(w http.ResponseWriter, r *http.Request, rt route) *apiError {
	ctx := r.Context()
	key, _ := rt.layout.BlobPath(rt.digest) // validated by parseRoute
	info, err := h.objects.Head(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return errorf(http.StatusNotFound, CodeBlobUnknown, "blob "+quote(rt.digest)+" is not in "+quote(rt.name))
	}
	if err != nil {
		return h.storageError(ctx, key, err)
	}
	if h.bad.is(key, info) {
		h.log.WarnContext(ctx, "registry refused a blob that failed verification", "object", key, "digest", rt.digest)
		return badBlob(rt.digest, key, info).because(refusedKnownBad)
	}
	// A store that knows the content digest (the local store) has already
	// hashed the blob: one with another digest is refused before a byte is
	// sent, for HEAD as for GET.
	if info.ContentSHA256 != "" && "sha256:"+info.ContentSHA256 != rt.digest {
		h.bad.mark(key, info)
		h.log.ErrorContext(ctx, "registry refused a blob that does not match its digest", "object", key, "digest", rt.digest, "content-sha256", info.ContentSHA256)
		return badBlob(rt.digest, key, info).because(refusedDigestMismatch)
	}
	hdr := w.Header()
	hdr.Set("Docker-Content-Digest", rt.digest)
	hdr.Set("Accept-Ranges", "bytes")
	hdr.Set("ETag", `"`+rt.digest+`"`)
	start, length, status := int64(0), info.Size, http.StatusOK
	if spec := r.Header.Get("Range"); spec != "" {
		var ok bool
		if start, length, ok = parseRange(spec, info.Size); !ok {
			hdr.Set("Content-Range", "bytes */"+strconv.FormatInt(info.Size, 10))
			return errorf(http.StatusRequestedRangeNotSatisfiable, CodeUnsupported, "range "+quote(spec)+" is not one satisfiable byte range of the "+strconv.FormatInt(info.Size, 10)+" byte blob")
		}
		status = http.StatusPartialContent
		hdr.Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(start+length-1, 10)+"/"+strconv.FormatInt(info.Size, 10))
	}
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("Content-Length", strconv.FormatInt(length, 10))
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return nil
	}
	body, err := h.objects.Open(ctx, key, start, length)
	if err != nil {
		hdr.Del("Content-Length")
		hdr.Del("Content-Range")
		if errors.Is(err, objstore.ErrNotFound) {
			return errorf(http.StatusNotFound, CodeBlobUnknown, "blob "+quote(rt.digest)+" is not in "+quote(rt.name))
		}
		return h.storageError(ctx, key, err)
	}
	defer body.Close()
	// The store vouches for the version opened when it is the one Head
	// described; if the object changed in between, it is verified while
	// it streams.
	vouched := false
	if v, ok := body.(interface{ version() objstore.Info }); ok && info.ContentSHA256 != "" {
		opened := v.version()
		vouched = opened.ContentSHA256 == info.ContentSHA256 && opened.ETag == info.ETag && opened.Size == info.Size
	}
	w.WriteHeader(status)
	out := countingWriter{w: w, n: &h.stats.blobBytes}
	if status == http.StatusPartialContent || vouched || h.good.is(key, info) {
		// A range cannot be verified without reading the whole blob (a
		// blob known to be bad is refused above, and the client verifies
		// what it assembles); a version its store or this handler has
		// verified needs no second hashing. They go out at the storage's
		// speed.
		buf := h.bufs.Get().(*[]byte)
		defer h.bufs.Put(buf)
		if err := copyPlain(out, body, *buf); err != nil {
			// The status is sent; the client sees a short body and retries.
			h.log.WarnContext(ctx, "registry blob stream ended early", "object", key, "digest", rt.digest, "err", err)
		}
		return nil
	}
	bufs := make([][]byte, verifyBuffers)
	for i := range bufs {
		b := h.bufs.Get().(*[]byte)
		defer h.bufs.Put(b)
		bufs[i] = *b
	}
	err = verifyingCopy(out, body, info.Size, rt.digest, bufs)
	if errors.Is(err, errDigestMismatch) {
		h.good.forget(key)
		h.bad.mark(key, info)
		h.stats.refused(refusedDigestMismatch)
		h.log.ErrorContext(ctx, "registry aborted a blob that does not match its digest", "object", key, "digest", rt.digest, "err", err)
		abort()
	}
	if err != nil {
		h.log.WarnContext(ctx, "registry blob stream ended early", "object", key, "digest", rt.digest, "err", err)
		return nil
	}
	h.good.mark(key, info)
	return nil
}

// badBlob is the answer for a blob whose bytes do not match its digest.
// A push replaces a stored blob of the wrong size, or one whose store
// knows its content digest; one it cannot tell from the real blob must be
// deleted first.
func badBlob(digest, key string, info objstore.Info) *apiError {
	msg := "blob " + quote(digest) + " in the cluster bucket does not match its digest: push the image again"
	if info.ContentSHA256 == "" {
		msg += " (push replaces a blob of the wrong size; if the size is right, delete the object " + key + " first)"
	}
	return errorf(http.StatusInternalServerError, CodeUnknown, msg)
}

// readIndex reads index.json, refusing one above oci.MaxIndexSize by its
// size before reading it and, should the size be wrong, after reading one
// byte more than the limit.
func (h *Handler) readIndex(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	tooBig := func(size string) error {
		return fmt.Errorf("%s is %s bytes, more than the %d byte limit: remove unused tags from the repository", key, size, oci.MaxIndexSize)
	}
	o, ok := h.objects.(objectOpener)
	if !ok {
		if opts.IfNoneMatch == "" {
			info, err := h.objects.Head(ctx, key)
			if err != nil {
				return objstore.Object{}, err
			}
			if info.Size > oci.MaxIndexSize {
				return objstore.Object{}, tooBig(strconv.FormatInt(info.Size, 10))
			}
		}
		obj, err := h.objects.Get(ctx, key, opts)
		if err == nil && len(obj.Data) > oci.MaxIndexSize {
			return objstore.Object{}, tooBig(strconv.Itoa(len(obj.Data)))
		}
		return obj, err
	}
	r, err := o.OpenObject(ctx, key, opts)
	if err != nil {
		return objstore.Object{}, err
	}
	defer r.Close()
	if r.Info.Size > oci.MaxIndexSize {
		return objstore.Object{}, tooBig(strconv.FormatInt(r.Info.Size, 10))
	}
	data, err := io.ReadAll(io.LimitReader(r, oci.MaxIndexSize+1))
	if err != nil {
		return objstore.Object{}, fmt.Errorf("read %s: %w", key, err)
	}
	if len(data) > oci.MaxIndexSize {
		return objstore.Object{}, tooBig("more than " + strconv.Itoa(oci.MaxIndexSize))
	}
	return objstore.Object{Data: data, ETag: r.Info.ETag}, nil
}

// copyPlain copies body to w, letting the server use sendfile(2) when
// body is a file range; any other body is copied in chunks of buf's size
// (the server's own copy would use 32 KiB ones).
func copyPlain(w io.Writer, body io.Reader, buf []byte) error {
	if u, ok := body.(interface{ Unwrap() io.Reader }); ok {
		_, err := io.Copy(w, u.Unwrap())
		return err
	}
	_, err := io.CopyBuffer(struct{ io.Writer }{w}, body, buf)
	return err
}

// index returns layout's index.json, revalidating the cached copy with
// its ETag.
func (h *Handler) index(ctx context.Context, l state.OCILayout) (*v1.IndexManifest, error) {
	key := l.IndexFile()
	cached, ok := h.cache.get(key)
	var opts objstore.GetOptions
	if ok {
		opts.IfNoneMatch = cached.etag
	}
	obj, err := h.readIndex(ctx, key, opts)
	if ok && errors.Is(err, objstore.ErrNotModified) {
		return cached.index, nil
	}
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			h.cache.drop(key)
		}
		return nil, err
	}
	m, err := oci.ParseIndex(obj.Data)
	if err != nil {
		return nil, err
	}
	h.cache.put(key, cachedIndex{etag: obj.ETag, index: m})
	return m, nil
}
