// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/oci"
)

func digestOf(d []byte) string {
	s := sha256.Sum256(d)
	return "sha256:" + hex.EncodeToString(s[:])
}

// seeded returns objects holding apps/hello with tag v1 → a manifest, and
// a 1000-byte blob.
func seeded() (f *fakeObjects, manifest []byte, blob []byte) {
	f = newFakeObjects()
	manifest = []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
	blob = bytes.Repeat([]byte("0123456789"), 100)
	md, bd := digestOf(manifest), digestOf(blob)
	f.put("apps/hello/blobs/sha256/"+md[7:], manifest)
	f.put("apps/hello/blobs/sha256/"+bd[7:], blob)
	h, _ := v1.NewHash(md)
	m := oci.MergeTag(oci.EmptyIndex(), "v1", v1.Descriptor{MediaType: types.OCIImageIndex, Size: int64(len(manifest)), Digest: h}, nil)
	data, _ := oci.EncodeIndex(m)
	f.put("apps/hello/index.json", data)
	f.put("deployments/index.json", []byte("{}"))
	return f, manifest, blob
}

type result struct {
	status int
	code   string
	header http.Header
	body   []byte
}

func do(t *testing.T, h http.Handler, method, target string, hdr ...string) result {
	t.Helper()
	req := httptest.NewRequest(method, "http://registry"+target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := result{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	var env struct {
		Errors []struct{ Code string } `json:"errors"`
	}
	if json.Unmarshal(res.body, &env) == nil && len(env.Errors) == 1 {
		res.code = env.Errors[0].Code
	}
	return res
}

func TestServesManifestsAndBlobs(t *testing.T) {
	f, manifest, blob := seeded()
	h := registry.New(f)
	md, bd := digestOf(manifest), digestOf(blob)

	if r := do(t, h, "GET", "/v2/"); r.status != 200 || r.header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
		t.Errorf("GET /v2/ = %d %v", r.status, r.header)
	}
	for _, ref := range []string{"v1", md} {
		r := do(t, h, "GET", "/v2/apps/hello/manifests/"+ref)
		if r.status != 200 || !bytes.Equal(r.body, manifest) || r.header.Get("Content-Type") != string(types.OCIImageIndex) || r.header.Get("Docker-Content-Digest") != md {
			t.Errorf("GET manifest %s = %d %q %v", ref, r.status, r.body, r.header)
		}
		f.take()
		r = do(t, h, "HEAD", "/v2/apps/hello/manifests/"+ref)
		if r.status != 200 || len(r.body) != 0 || r.header.Get("Content-Length") != strconv.Itoa(len(manifest)) || r.header.Get("Docker-Content-Digest") != md {
			t.Errorf("HEAD manifest %s = %d %v", ref, r.status, r.header)
		}
		if keys := f.take(); len(keys) != 2 || keys[0] != "apps/hello/index.json" || keys[1] != "apps/hello/blobs/sha256/"+md[7:] {
			t.Errorf("HEAD manifest read %v, want the (cached, revalidated) index and the manifest it verifies", keys)
		}
	}
	r := do(t, h, "GET", "/v2/apps/hello/blobs/"+bd)
	if r.status != 200 || !bytes.Equal(r.body, blob) || r.header.Get("Docker-Content-Digest") != bd || r.header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("GET blob = %d %v", r.status, r.header)
	}
	for _, tc := range []struct {
		rng, contentRange string
		status            int
		body              string
	}{
		{"bytes=0-9", "bytes 0-9/1000", 206, "0123456789"},
		{"bytes=995-", "bytes 995-999/1000", 206, "56789"},
		{"bytes=-3", "bytes 997-999/1000", 206, "789"},
		{"bytes=990-5000", "bytes 990-999/1000", 206, "0123456789"},
		{"bytes=1000-", "bytes */1000", 416, ""},
		{"bytes=5-2", "bytes */1000", 416, ""},
		{"bytes=0-1,5-6", "bytes */1000", 416, ""},
		{"items=0-1", "bytes */1000", 416, ""},
	} {
		r := do(t, h, "GET", "/v2/apps/hello/blobs/"+bd, "Range", tc.rng)
		if r.status != tc.status || r.header.Get("Content-Range") != tc.contentRange || (tc.status == 206 && string(r.body) != tc.body) {
			t.Errorf("Range %s = %d %q %q, want %d %q %q", tc.rng, r.status, r.header.Get("Content-Range"), r.body, tc.status, tc.contentRange, tc.body)
		}
	}
	if r := do(t, h, "HEAD", "/v2/apps/hello/blobs/"+bd); r.status != 200 || r.header.Get("Content-Length") != "1000" || len(r.body) != 0 {
		t.Errorf("HEAD blob = %d %v", r.status, r.header)
	}
}

func TestRequestsStayInImageLayouts(t *testing.T) {
	f, _, _ := seeded()
	big := bytes.Repeat([]byte(" "), oci.MaxIndexSize+1)
	f.put("apps/big/index.json", big)
	h := registry.New(f)
	hex64 := strings.Repeat("a", 64)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"POST", "/v2/apps/hello/blobs/uploads/", 405, "UNSUPPORTED"},
		{"PUT", "/v2/apps/hello/manifests/v1", 405, "UNSUPPORTED"},
		{"DELETE", "/v2/apps/hello/manifests/v1", 405, "UNSUPPORTED"},
		{"PATCH", "/v2/apps/hello/blobs/uploads/x", 405, "UNSUPPORTED"},
		{"OPTIONS", "/v2/", 405, "UNSUPPORTED"},
		{"GET", "/v2/_catalog", 404, "UNSUPPORTED"},
		{"GET", "/v2/apps/hello/tags/list", 404, "UNSUPPORTED"},
		{"GET", "/v2/apps/hello/referrers/sha256:" + hex64, 404, "UNSUPPORTED"},
		{"GET", "/deployments/index.json", 404, "UNSUPPORTED"},
		{"HEAD", "/v2/_catalog", 404, ""},
		{"GET", "/", 404, "UNSUPPORTED"},
		{"GET", "/v2/apps/hello", 404, "UNSUPPORTED"},
		{"GET", "/v2/apps/../deployments/manifests/v1", 400, "NAME_INVALID"},
		{"GET", "/v2/apps/hello/../../deployments/manifests/v1", 400, "NAME_INVALID"},
		{"GET", "/v2/apps/./hello/manifests/v1", 400, "NAME_INVALID"},
		{"GET", "/v2/apps%2F..%2Fdeployments/manifests/v1", 400, "NAME_INVALID"},
		{"GET", "/v2/apps/hello%2F..%2F..%2Ftfstate/manifests/v1", 400, "NAME_INVALID"},
		{"GET", "/v2/apps/hello/manifests/%2e%2e", 400, "NAME_INVALID"},
		{"GET", "/v2/mirror/../../tfstate/manifests/v1", 400, "NAME_INVALID"},
		{"GET", "/v2/mirror/registry.k8s.io/manifests/v1", 400, "NAME_INVALID"},
		{"GET", "/v2/apps//hello/manifests/v1", 400, "NAME_INVALID"},
		{"GET", "/v2/apps/Hello/manifests/v1", 400, "NAME_INVALID"},
		{"GET", `/v2/apps\hello/manifests/v1`, 400, "NAME_INVALID"},
		{"GET", "/v2/deployments/manifests/v1", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/tfstate/manifests/podmin.tfstate", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/nodegroups/x/blobs/sha256:" + hex64, 404, "NAME_UNKNOWN"},
		{"GET", "/v2/apps/hello/manifests/sha256:xyz", 400, "DIGEST_INVALID"},
		{"GET", "/v2/apps/hello/manifests/sha256:" + strings.ToUpper(hex64), 400, "DIGEST_INVALID"},
		{"GET", "/v2/apps/hello/blobs/sha512:" + hex64 + hex64, 400, "DIGEST_INVALID"},
		{"GET", "/v2/apps/hello/blobs/latest", 400, "DIGEST_INVALID"},
		{"GET", "/v2/apps/hello/manifests/..", 404, "MANIFEST_UNKNOWN"},
		{"GET", "/v2/apps/hello/manifests/v2", 404, "MANIFEST_UNKNOWN"},
		{"GET", "/v2/apps/hello/manifests/sha256:" + hex64, 404, "MANIFEST_UNKNOWN"},
		{"GET", "/v2/apps/hello/blobs/sha256:" + hex64, 404, "BLOB_UNKNOWN"},
		{"GET", "/v2/apps/none/manifests/v1", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/mirror/registry.k8s.io/pause/manifests/3.10", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/apps/big/manifests/v1", 500, "UNKNOWN"},
	} {
		r := do(t, h, tc.method, tc.path)
		if r.status != tc.status || (tc.method != "HEAD" && r.code != tc.code) {
			t.Errorf("%s %s = %d %s (%s), want %d %s", tc.method, tc.path, r.status, r.code, r.body, tc.status, tc.code)
		}
		for _, k := range f.take() {
			if !reachable(k) {
				t.Errorf("%s %s read %q, outside apps/ and mirror/ layouts", tc.method, tc.path, k)
			}
		}
	}
}

func TestIndexIsRevalidatedByETag(t *testing.T) {
	f, manifest, _ := seeded()
	h := registry.New(f)
	if r := do(t, h, "GET", "/v2/apps/hello/manifests/v1"); r.status != 200 {
		t.Fatal(r.status)
	}
	// Retag v1 to a manifest that is missing: the change must be seen.
	other := append([]byte{}, manifest...)
	other = append(other, ' ')
	hh, _ := v1.NewHash(digestOf(other))
	m := oci.MergeTag(oci.EmptyIndex(), "v1", v1.Descriptor{MediaType: types.OCIImageIndex, Size: int64(len(other)), Digest: hh}, nil)
	data, _ := oci.EncodeIndex(m)
	f.put("apps/hello/index.json", data)
	if r := do(t, h, "HEAD", "/v2/apps/hello/manifests/v1"); r.status != 404 {
		t.Errorf("after retag to a missing manifest HEAD = %d, want 404", r.status)
	}
	if r := do(t, h, "GET", "/v2/apps/hello/manifests/v1"); r.status != 404 || r.code != "MANIFEST_UNKNOWN" {
		t.Errorf("missing manifest blob = %d %s", r.status, r.code)
	}
}
