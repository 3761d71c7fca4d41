// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/local"
)

func TestManifestExampleRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/manifest-example.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Encode(); !bytes.Equal(got, data) {
		t.Fatalf("encoding differs from the specification's example:\n%s", got)
	}
	if f := m.Files(); len(f) != 2 || f[1].Key != "containerd" || f[1].Arch != ARM64 || f[1].Size != 38000000 {
		t.Fatalf("files %+v", f)
	}
}

func TestParseManifestRejects(t *testing.T) {
	good, _ := os.ReadFile("testdata/manifest-example.json")
	for name, edit := range map[string][2]string{
		"version":      {`"version": 1`, `"version": 2`},
		"architecture": {`"arm64": {`, `"riscv64": {`},
		"path":         {`"path": "dependencies/containerd/containerd-v2.1.4-linux-amd64`, `"path": "dependencies/runc/containerd-v2.1.4-linux-amd64`},
		"digest":       {`sha256:0000`, `md5:0000`},
		"size":         {`39000000`, `0`},
		"unknown":      {`"version": 1,`, `"version": 1, "extra": true,`},
		"image path":   {`"path": "mirror/registry.k8s.io/pause"`, `"path": "apps/pause"`},
	} {
		bad := strings.Replace(string(good), edit[0], edit[1], 1)
		if bad == string(good) {
			t.Fatalf("%s: edit did not apply", name)
		}
		if _, err := ParseManifest([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	good, _ := os.ReadFile("testdata/manifest-example.json")
	f.Add(good)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		again, err := ParseManifest(m.Encode())
		if err != nil || !bytes.Equal(again.Encode(), m.Encode()) {
			t.Fatalf("round trip of an accepted manifest failed: %v", err)
		}
	})
}

// testStores runs fn against every store Podmin publishes to.
func testStores(t *testing.T, fn func(t *testing.T, store objstore.Store)) {
	t.Run("local", func(t *testing.T) {
		b := local.Open(t.TempDir() + "/bucket")
		if err := b.CreateBucket(context.Background()); err != nil {
			t.Fatal(err)
		}
		fn(t, b)
	})
	t.Run("versitygw", func(t *testing.T) { fn(t, versityBucket(t)) })
}

// testFiles resolves a small mixed set against the fake upstream: release
// assets with known sizes and dl.k8s.io files whose size only a download
// tells.
func testFiles(t *testing.T, u *fakeUpstream) []File {
	t.Helper()
	var defs []Dependency
	for _, k := range []string{"containerd", "cni-plugins", "kubelet", "crictl"} {
		defs = append(defs, def(t, k))
	}
	files, err := u.resolver().ResolveAll(context.Background(), defs, Archs)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func testPublishOptions(t *testing.T, u *fakeUpstream, files []File) PublishOptions {
	return PublishOptions{
		Archs: Archs, Files: files,
		Cache:  &Cache{Dir: t.TempDir(), Client: u.Server.Client()},
		Images: Images,
		Mirror: func(context.Context, objstore.Store, Image) (ImageEntry, error) { return pauseEntry, nil },
		Warn:   func(msg string) { t.Errorf("warning: %s", msg) },
	}
}

var pauseEntry = ImageEntry{Version: "3.10.2", Source: "registry.k8s.io/pause:3.10.2", Path: "mirror/registry.k8s.io/pause",
	Digest: "sha256:" + strings.Repeat("3", 64), Size: 1090874}

func TestPublishThenMatchTransfersNothing(t *testing.T) {
	testStores(t, func(t *testing.T, store objstore.Store) {
		ctx := context.Background()
		u := newFakeUpstream(t)
		files := testFiles(t, u)
		res, err := Publish(ctx, store, testPublishOptions(t, u, files))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Written || len(res.Uploaded) != len(files) || !slices.Equal(res.Images, []string{"pause"}) {
			t.Fatalf("first publication: %+v", res)
		}
		for _, f := range files {
			obj, err := store.Get(ctx, f.Path, objstore.GetOptions{})
			if err != nil || !bytes.Equal(obj.Data, u.Served(strings.TrimPrefix(f.URL, u.Server.URL))) {
				t.Fatalf("%s: %q %v", f.Path, obj.Data, err)
			}
		}
		obj, err := store.Get(ctx, ManifestKey, objstore.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseManifest(obj.Data)
		if err != nil {
			t.Fatal(err)
		}
		k := m.Dependencies["kubelet"][ARM64]
		if k.Size != int64(len(content("/k8s/release/v1.36.2/bin/linux/arm64/kubelet"))) || k.Path != "dependencies/kubelet/kubelet-v1.36.2-linux-arm64" {
			t.Fatalf("kubelet entry %+v: the size must be exact", k)
		}

		// A second setup with the same desired set: a fresh, empty cache
		// and a refusing network prove nothing is downloaded; the counting
		// wrapper proves nothing is uploaded.
		counted := faultstore.New(store)
		opts := testPublishOptions(t, u, testFiles(t, u))
		upstreamBefore := u.Total()
		opts.Cache = &Cache{Dir: t.TempDir(), Client: refusingClient()}
		opts.Mirror = func(context.Context, objstore.Store, Image) (ImageEntry, error) {
			t.Error("image mirrored again")
			return pauseEntry, nil
		}
		res, err = Publish(ctx, counted, opts)
		if err != nil {
			t.Fatal(err)
		}
		c := counted.Counts()
		if res.Written || len(res.Uploaded) != 0 || c.Writes() != 0 || c.Head != 0 || c.Get != 1 || c.List != 1 {
			t.Fatalf("matching manifest: result %+v, requests %+v: want one manifest read, one retention listing, no transfers", res, c)
		}
		if u.Total() != upstreamBefore {
			t.Fatalf("matching manifest downloaded from upstream")
		}
	})
}

func TestPublishInterruptedUploadIsInvisibleAndRepeatable(t *testing.T) {
	testStores(t, func(t *testing.T, store objstore.Store) {
		ctx := context.Background()
		u := newFakeUpstream(t)
		files := testFiles(t, u)
		faulty := faultstore.New(store, faultstore.WithRules(faultstore.Rule{
			Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPut}, Prefix: "dependencies/", Skip: 3, Limit: 1}))
		opts := testPublishOptions(t, u, files)
		opts.Concurrency = 1
		res, err := Publish(ctx, faulty, opts)
		if !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("err = %v, want the injected failure", err)
		}
		if _, err := store.Get(ctx, ManifestKey, objstore.GetOptions{}); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("manifest after an interrupted publication: %v; the partial set must stay invisible", err)
		}
		if len(res.Uploaded) != 3 {
			t.Fatalf("uploaded before the failure: %v", res.Uploaded)
		}
		res2, err := Publish(ctx, store, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !res2.Written || len(res2.Uploaded) != len(files)-3 {
			t.Fatalf("repeat uploaded %d of %d files: %v", len(res2.Uploaded), len(files), res2.Uploaded)
		}
		for _, p := range res.Uploaded {
			if slices.Contains(res2.Uploaded, p) {
				t.Fatalf("%s was uploaded again", p)
			}
		}
	})
}

// racingStore lets a competitor commit a manifest just before the first
// conditional manifest write passes through.
type racingStore struct {
	objstore.Store
	once sync.Once
	race func()
}

func (s *racingStore) before(key string) {
	if key == ManifestKey {
		s.once.Do(s.race)
	}
}

func (s *racingStore) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	s.before(key)
	return s.Store.PutIfAbsent(ctx, key, data)
}

func (s *racingStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	s.before(key)
	return s.Store.PutIfMatch(ctx, key, data, etag)
}

func (s *racingStore) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return objstore.OpenObject(ctx, s.Store, key, opts)
}

func (s *racingStore) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	return objstore.WriteObject(ctx, s.Store, key, body, size, opts)
}

func TestPublishCompetingWriterRetriesCleanly(t *testing.T) {
	testStores(t, func(t *testing.T, store objstore.Store) {
		ctx := context.Background()
		u := newFakeUpstream(t)
		files := testFiles(t, u)
		var competitor PublishResult
		rs := &racingStore{Store: store}
		rs.race = func() {
			// Another setup publishes amd64 only, and wins.
			var amd []File
			for _, f := range files {
				if f.Arch == AMD64 {
					amd = append(amd, f)
				}
			}
			var err error
			competitor, err = Publish(ctx, store, testPublishOptions(t, u, amd))
			if err != nil || !competitor.Written {
				t.Errorf("competitor: %+v %v", competitor, err)
			}
		}
		res, err := Publish(ctx, rs, testPublishOptions(t, u, files))
		if err != nil {
			t.Fatal(err)
		}
		if res.Attempts != 2 || !res.Written {
			t.Fatalf("attempts %d written %v: want one compare-and-swap failure and one clean retry", res.Attempts, res.Written)
		}
		m, etag, err := ReadManifest(ctx, store)
		if err != nil || etag != res.ETag || !bytes.Equal(m.Encode(), res.Manifest.Encode()) || len(m.Files()) != len(files) {
			t.Fatalf("final manifest %v %v", m, err)
		}
		if etag == competitor.ETag {
			t.Fatal("the competitor's manifest was not replaced")
		}
	})
}

func TestRetentionMatrix(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	obj := func(key string, age time.Duration) objstore.Info {
		return objstore.Info{Key: key, LastModified: now.Add(-age), ETag: "e"}
	}
	type tc struct {
		name     string
		objects  []objstore.Info
		manifest []File
		deleted  []string
	}
	for _, c := range []tc{
		{name: "two versions stay however old", objects: []objstore.Info{
			obj("dependencies/kubelet/kubelet-v1.36.1-linux-amd64", 400*day),
			obj("dependencies/kubelet/kubelet-v1.36.2-linux-amd64", 300*day)}},
		{name: "third newest goes at 28 days", objects: []objstore.Info{
			obj("dependencies/kubelet/kubelet-v1.36.1-linux-amd64", 28*day),
			obj("dependencies/kubelet/kubelet-v1.36.10-linux-amd64", 1*day),
			obj("dependencies/kubelet/kubelet-v1.36.2-linux-amd64", 2*day)},
			deleted: []string{"dependencies/kubelet/kubelet-v1.36.1-linux-amd64"}},
		{name: "younger than 28 days stays", objects: []objstore.Info{
			obj("dependencies/kubelet/kubelet-v1.36.1-linux-amd64", 28*day-time.Second),
			obj("dependencies/kubelet/kubelet-v1.36.3-linux-amd64", 1*day),
			obj("dependencies/kubelet/kubelet-v1.36.2-linux-amd64", 2*day)}},
		{name: "architectures counted apart", objects: []objstore.Info{
			obj("dependencies/containerd/containerd-v2.1.1-linux-amd64.tar.gz", 90*day),
			obj("dependencies/containerd/containerd-v2.1.2-linux-amd64.tar.gz", 90*day),
			obj("dependencies/containerd/containerd-v2.1.3-linux-amd64.tar.gz", 90*day),
			obj("dependencies/containerd/containerd-v2.1.1-linux-arm64.tar.gz", 90*day),
			obj("dependencies/containerd/containerd-v2.1.2-linux-arm64.tar.gz", 90*day)},
			deleted: []string{"dependencies/containerd/containerd-v2.1.1-linux-amd64.tar.gz"}},
		{name: "a previously uploaded architecture keeps two", manifest: []File{
			{Key: "containerd", Arch: AMD64, Path: "dependencies/containerd/containerd-v2.1.9-linux-amd64.tar.gz"}},
			objects: []objstore.Info{
				obj("dependencies/containerd/containerd-v2.1.9-linux-amd64.tar.gz", 1*day),
				obj("dependencies/containerd/containerd-v2.1.1-linux-arm64.tar.gz", 90*day),
				obj("dependencies/containerd/containerd-v2.1.2-linux-arm64.tar.gz", 90*day),
				obj("dependencies/containerd/containerd-v2.1.0-linux-arm64.tar.gz", 90*day)},
			deleted: []string{"dependencies/containerd/containerd-v2.1.0-linux-arm64.tar.gz"}},
		{name: "every object of the version must be old", objects: []objstore.Info{
			obj("dependencies/jool/jool-v4.1.12-6.12.30+deb13-cloud-amd64-linux-amd64.tar.gz", 90*day),
			obj("dependencies/jool/jool-v4.1.12-6.12.30+deb13-cloud-amd64-linux-amd64.tar.gz.extra", 3*day),
			obj("dependencies/jool/jool-v4.1.13-6.12.30+deb13-cloud-amd64-linux-amd64.tar.gz", 60*day),
			obj("dependencies/jool/jool-v4.1.14-6.12.30+deb13-cloud-amd64-linux-amd64.tar.gz", 30*day)}},
		{name: "the manifest's version stays", manifest: []File{
			{Key: "podmin-agent", Arch: ARM64, Path: "dependencies/podmin-agent/podmin-agent-v1.2.0-linux-arm64"}},
			objects: []objstore.Info{
				obj("dependencies/podmin-agent/podmin-agent-v1.2.0-linux-arm64", 90*day),
				obj("dependencies/podmin-agent/podmin-agent-v1.3.0-linux-arm64", 90*day),
				obj("dependencies/podmin-agent/podmin-agent-v1.4.0-linux-arm64", 90*day)}},
		{name: "Debian revisions by Debian's rules", objects: []objstore.Info{
			obj("dependencies/libpq5/libpq5-v17.6-9-linux-amd64.deb", 90*day),
			obj("dependencies/libpq5/libpq5-v17.6-10-linux-amd64.deb", 90*day),
			obj("dependencies/libpq5/libpq5-v17.6-8-linux-amd64.deb", 90*day)},
			deleted: []string{"dependencies/libpq5/libpq5-v17.6-8-linux-amd64.deb"}},
		{name: "non-semantic versions by number, not bytes", objects: []objstore.Info{
			obj("dependencies/coredns/coredns-v1.12.3.9-linux-amd64.tgz", 90*day),
			obj("dependencies/coredns/coredns-v1.12.3.10-linux-amd64.tgz", 90*day),
			obj("dependencies/coredns/coredns-v1.12.3.11-linux-amd64.tgz", 90*day),
			obj("dependencies/coredns/coredns-v1.12.3.8-linux-amd64.tgz", 90*day)},
			deleted: []string{"dependencies/coredns/coredns-v1.12.3.9-linux-amd64.tgz", "dependencies/coredns/coredns-v1.12.3.8-linux-amd64.tgz"}},
		{name: "foreign objects and the manifest are left alone", objects: []objstore.Info{
			obj("dependencies/manifest.json", 900*day),
			obj("dependencies/notes/readme.txt", 900*day),
			obj("dependencies/kubelet/kubelet-v1.36.0-linux-riscv64", 900*day)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, o := range RetentionPlan(c.objects, NewManifest(c.manifest, nil), now) {
				got = append(got, o.Key)
			}
			if !slices.Equal(got, c.deleted) {
				t.Fatalf("deleted %v, want %v", got, c.deleted)
			}
		})
	}
}

func TestRetainOnStore(t *testing.T) {
	testStores(t, func(t *testing.T, store objstore.Store) {
		ctx := context.Background()
		for _, v := range []string{"1.36.0", "1.36.1", "1.36.2", "1.36.3"} {
			for _, a := range []string{"amd64", "arm64"} {
				if _, err := store.Put(ctx, "dependencies/kubelet/kubelet-v"+v+"-linux-"+a, []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
		}
		var warnings []string
		warn := func(m string) { warnings = append(warnings, m) }
		if del := Retain(ctx, store, nil, time.Now().Add(27*24*time.Hour), warn); len(del) != 0 {
			t.Fatalf("deleted young versions: %v", del)
		}
		// Failures warn and do not stop the others.
		faulty := faultstore.New(store, faultstore.WithRules(faultstore.Rule{
			Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpDelete}, Prefix: "dependencies/kubelet/kubelet-v1.36.0-linux-amd64"}))
		del := Retain(ctx, faulty, nil, time.Now().Add(29*24*time.Hour), warn)
		want := []string{"dependencies/kubelet/kubelet-v1.36.1-linux-amd64",
			"dependencies/kubelet/kubelet-v1.36.0-linux-arm64", "dependencies/kubelet/kubelet-v1.36.1-linux-arm64"}
		slices.Sort(del)
		slices.Sort(want)
		if !slices.Equal(del, want) || len(warnings) != 1 {
			t.Fatalf("deleted %v warnings %v", del, warnings)
		}
		left, err := objstore.ListAll(ctx, store, "dependencies/")
		if err != nil || len(left) != 5 {
			t.Fatalf("left %d objects (%v)", len(left), err)
		}
		// Listing failure warns only.
		broken := faultstore.New(store, faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpList}}))
		if del := Retain(ctx, broken, nil, time.Now(), warn); del != nil || len(warnings) != 2 {
			t.Fatalf("listing failure: %v %v", del, warnings)
		}
	})
}

func TestDesiredSet(t *testing.T) {
	u := newFakeUpstream(t)
	r := u.resolver()
	r.Kernels = map[Arch]string{AMD64: "6.12.41+deb13-cloud-amd64"}
	files, err := Desired(context.Background(), PublishOptions{Archs: []Arch{ARM64}, NAT64Archs: []Arch{AMD64}, Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Key+"/"+string(f.Arch))
	}
	want := "containerd/arm64 gvisor/arm64 cni-plugins/arm64 kubelet/arm64 crictl/arm64 coredns/arm64 podmin-agent/arm64 jool/amd64"
	if strings.Join(got, " ") != want {
		t.Fatalf("desired %s\nwant    %s", strings.Join(got, " "), want)
	}
}
