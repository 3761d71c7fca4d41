// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/syncio"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer = syncio.Buffer

// get fetches url over real HTTP and reports the status and whether the
// body arrived complete (as long as Content-Length, without a read error).
func get(t *testing.T, method, url string) (status int, body []byte, complete bool) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, false
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	return resp.StatusCode, body, err == nil && int64(len(body)) == resp.ContentLength
}

// A tampered blob is never served complete: the response is aborted before
// its last bytes, the mismatch is logged with the object's path, and later
// requests (GET and HEAD) are refused until the object changes.
func TestTamperedBlobIsNeverServedComplete(t *testing.T) {
	f := newFakeObjects()
	good := bytes.Repeat([]byte("podmin layer "), 100_000) // 1.3 MB: several stream chunks
	d := digestOf(good)
	key := "apps/hello/blobs/sha256/" + d[7:]
	for _, tamper := range []struct {
		name string
		data []byte
	}{
		{"flipped first byte", append([]byte{'P'}, good[1:]...)},
		{"flipped last byte", append(append([]byte{}, good[:len(good)-1]...), 'X')},
		{"truncated", good[:len(good)-1]},
		{"extended", append(append([]byte{}, good...), '!')},
	} {
		t.Run(tamper.name, func(t *testing.T) {
			var logs syncBuffer
			srv := httptest.NewServer(registry.New(f, registry.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))))
			defer srv.Close()
			url := srv.URL + "/v2/apps/hello/blobs/" + d
			f.put(key, good)
			if status, body, complete := get(t, "GET", url); status != 200 || !complete || !bytes.Equal(body, good) {
				t.Fatalf("good blob: %d complete=%v", status, complete)
			}
			f.put(key, tamper.data)
			status, body, complete := get(t, "GET", url)
			if complete && status == 200 {
				t.Fatalf("tampered blob served complete with 200 (%d bytes)", len(body))
			}
			if bytes.Equal(body, tamper.data) {
				t.Fatal("every tampered byte was delivered")
			}
			if !strings.Contains(logs.String(), key) || !strings.Contains(logs.String(), "does not match its digest") {
				t.Fatalf("mismatch not logged with the object path:\n%s", logs.String())
			}
			for _, m := range []string{"GET", "HEAD"} {
				if status, _, _ := get(t, m, url); status != 500 {
					t.Errorf("%s of a known tampered blob = %d, want 500", m, status)
				}
			}
			// A store without content digests: push can replace only a
			// blob of the wrong size, so the answer says what else to do.
			if _, body, _ := get(t, "GET", url); !strings.Contains(string(body), "delete the object "+key) {
				t.Errorf("the refusal does not say how to repair it: %s", body)
			}
			f.put(key, good) // repaired: verified and served again
			if status, body, complete := get(t, "GET", url); status != 200 || !complete || !bytes.Equal(body, good) {
				t.Fatalf("repaired blob: %d complete=%v", status, complete)
			}
		})
	}
}

// HEAD on a manifest answers exactly as GET would (status, error code,
// digest and length headers) for every state of its blob.
func TestManifestHeadAgreesWithGet(t *testing.T) {
	manifest := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
	md := digestOf(manifest)
	key := "apps/hello/blobs/sha256/" + md[7:]
	for _, tc := range []struct {
		name   string
		blob   []byte // nil: missing
		status int
	}{
		{"intact", manifest, 200},
		{"missing", nil, 404},
		{"tampered", append([]byte{'['}, manifest[1:]...), 500},
		{"truncated", manifest[:len(manifest)-1], 500},
		{"extended", append(append([]byte{}, manifest...), ' '), 500},
		{"empty", []byte{}, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeObjects()
			h, _ := v1.NewHash(md)
			ix := oci.MergeTag(oci.EmptyIndex(), "v1", v1.Descriptor{MediaType: types.OCIImageIndex, Size: int64(len(manifest)), Digest: h}, nil)
			data, _ := oci.EncodeIndex(ix)
			f.put("apps/hello/index.json", data)
			if tc.blob != nil {
				f.put(key, tc.blob)
			}
			reg := registry.New(f)
			for _, ref := range []string{"v1", md} {
				g := do(t, reg, "GET", "/v2/apps/hello/manifests/"+ref)
				hd := do(t, reg, "HEAD", "/v2/apps/hello/manifests/"+ref)
				if g.status != tc.status || hd.status != g.status {
					t.Fatalf("%s: GET %d, HEAD %d, want both %d", ref, g.status, hd.status, tc.status)
				}
				for _, name := range []string{"Content-Type", "Docker-Content-Digest", "Content-Length", "ETag"} {
					if g.header.Get(name) != hd.header.Get(name) {
						t.Errorf("%s: %s differs: GET %q, HEAD %q", ref, name, g.header.Get(name), hd.header.Get(name))
					}
				}
				if len(hd.body) != 0 {
					t.Errorf("HEAD sent a body")
				}
			}
			// The manifest read is bounded by its descriptor: never more
			// than one byte past the size it must have.
			f.mu.Lock()
			opens := slices.Clone(f.opens)
			f.mu.Unlock()
			want := fmt.Sprintf("%s 0+%d", key, len(manifest)+1)
			for _, o := range opens {
				if o != want {
					t.Errorf("opened %q, want %q", o, want)
				}
			}
		})
	}
}

// HEAD on a blob in a local bucket answers exactly as GET would, on the
// first request already, for every state of its file: the store's content
// digest tells a blob that does not match before anything is sent.
func TestLocalBlobHeadAgreesWithGet(t *testing.T) {
	blob := bytes.Repeat([]byte("podmin layer "), 30_000)
	for _, tc := range []struct {
		name    string
		content []byte // nil: missing
		behind  bool   // written behind the store's back
		status  int
		code    string
	}{
		{"intact", blob, false, 200, ""},
		{"intact, written by hand", blob, true, 200, ""},
		{"missing", nil, false, 404, "BLOB_UNKNOWN"},
		{"other content", append([]byte{'P'}, blob[1:]...), false, 500, "UNKNOWN"},
		{"truncated by hand", blob[:len(blob)-1], true, 500, "UNKNOWN"},
		{"extended by hand", append(bytes.Clone(blob), '!'), true, 500, "UNKNOWN"},
		{"empty", []byte{}, false, 500, "UNKNOWN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := local.Open(filepath.Join(t.TempDir(), "bucket"))
			if err := bucket.CreateBucket(t.Context()); err != nil {
				t.Fatal(err)
			}
			d := digestOf(blob)
			key := "apps/hello/blobs/sha256/" + d[7:]
			switch {
			case tc.content == nil:
			case tc.behind:
				p := filepath.Join(bucket.Dir(), filepath.FromSlash(key))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, tc.content, 0o644); err != nil {
					t.Fatal(err)
				}
			default:
				if _, err := bucket.Put(t.Context(), key, tc.content); err != nil {
					t.Fatal(err)
				}
			}
			for _, first := range []string{"HEAD", "GET"} {
				reg := registry.New(registry.LocalObjects(bucket)) // nothing verified yet
				second := map[string]string{"HEAD": "GET", "GET": "HEAD"}[first]
				a := do(t, reg, first, "/v2/apps/hello/blobs/"+d)
				b := do(t, reg, second, "/v2/apps/hello/blobs/"+d)
				get := map[string]result{first: a, second: b}["GET"]
				if a.status != tc.status || b.status != tc.status || get.code != tc.code {
					t.Fatalf("%s then %s: %d, %d, GET error code %q; want both %d, %q", first, second, a.status, b.status, get.code, tc.status, tc.code)
				}
				for _, name := range []string{"Content-Type", "Docker-Content-Digest", "Content-Length", "ETag"} {
					if a.header.Get(name) != b.header.Get(name) {
						t.Errorf("%s differs: %s %q, %s %q", name, first, a.header.Get(name), second, b.header.Get(name))
					}
				}
				if tc.status == 200 && !bytes.Equal(get.body, blob) {
					t.Errorf("GET body is not the blob")
				}
				if tc.status != 200 && bytes.Contains(get.body, []byte("podmin layer")) {
					t.Errorf("GET of a bad blob sent its bytes")
				}
			}
		})
	}
}

// An oversized index.json is refused by its size, before it is read.
func TestOversizedIndexRefusedEarly(t *testing.T) {
	f := newFakeObjects()
	f.put("apps/big/index.json", bytes.Repeat([]byte(" "), oci.MaxIndexSize+1))
	r := do(t, registry.New(f), "GET", "/v2/apps/big/manifests/v1")
	if r.status != 500 {
		t.Fatalf("oversized index: %d", r.status)
	}
	if len(f.gets) != 0 {
		t.Fatalf("read %q whole, want only its size checked", f.gets)
	}
}

// localBlob stores content in a new local bucket under the blob key of
// the digest of blob, and serves the bucket through a registry whose log
// it returns, with the blob's key and URL.
func localBlob(t *testing.T, blob, content []byte) (*local.Bucket, string, string, *syncBuffer) {
	bucket := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := bucket.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	d := digestOf(blob)
	key := "apps/hello/blobs/sha256/" + d[7:]
	if _, err := bucket.Put(t.Context(), key, content); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	srv := httptest.NewServer(registry.New(registry.LocalObjects(bucket), registry.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))))
	t.Cleanup(srv.Close)
	return bucket, key, srv.URL + "/v2/apps/hello/blobs/" + d, logs
}

// The same on a local bucket, where a verified blob version is served
// with sendfile: a byte changed in place afterwards is still caught.
func TestTamperedLocalBlobIsNeverServedComplete(t *testing.T) {
	good := bytes.Repeat([]byte("podmin layer "), 100_000)
	bucket, key, url, logs := localBlob(t, good, good)
	for range 2 { // verified, then served as a verified version
		if status, body, complete := get(t, "GET", url); status != 200 || !complete || !bytes.Equal(body, good) {
			t.Fatalf("good blob: %d complete=%v", status, complete)
		}
	}
	objstoretest.EditInPlace(t, filepath.Join(bucket.Dir(), filepath.FromSlash(key)), int64(len(good)/2), []byte("X"), false)
	if status, _, complete := get(t, "GET", url); status == 200 && complete {
		t.Fatal("a blob changed in place was served complete with 200")
	}
	if status, _, _ := get(t, "GET", url); status != 500 {
		t.Fatalf("known tampered blob = %d, want 500", status)
	}
	if !strings.Contains(logs.String(), key) {
		t.Fatalf("mismatch not logged with the object path:\n%s", logs.String())
	}
}

// On a local bucket the store's ETag is the SHA-256 it computed from the
// bytes it wrote, so a blob whose content is not its digest is refused on
// the very first request, HEAD as GET, before a byte is sent; and a blob
// the store vouches for is served without hashing it again, which shows
// as the record's documented limit: content changed with inode, size and
// modification time all kept is served as the store described it.
func TestLocalBlobTrustsTheStoresDigest(t *testing.T) {
	good := bytes.Repeat([]byte("podmin layer "), 100_000)
	other := bytes.Repeat([]byte("other layer! "), 100_000)
	bucket, key, url, logs := localBlob(t, good, other)
	for _, m := range []string{"HEAD", "GET"} {
		if status, body, _ := get(t, m, url); status != 500 || bytes.Contains(body, other[:64]) {
			t.Fatalf("first %s of a blob stored with other content = %d (%d bytes), want 500 and none of its bytes", m, status, len(body))
		}
	}
	if !strings.Contains(logs.String(), key) || !strings.Contains(logs.String(), "does not match its digest") {
		t.Fatalf("mismatch not logged with the object path:\n%s", logs.String())
	}

	if _, err := bucket.Put(t.Context(), key, good); err != nil {
		t.Fatal(err)
	}
	objstoretest.EditInPlace(t, filepath.Join(bucket.Dir(), filepath.FromSlash(key)), int64(len(good)/2), []byte("X"), true)
	status, body, complete := get(t, "GET", url)
	if status != 200 || !complete || body[len(good)/2] != 'X' {
		t.Fatalf("GET of a vouched version = %d complete=%v; want it served from the file without hashing", status, complete)
	}
}
