// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/builtins/deployments"
	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/builtins/openv/openvtest"
	secretops "podmin.dev/podmin/builtins/secrets"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/secrets/parameterstore"
	"podmin.dev/podmin/internal/secrets/secretsmanager"
	"podmin.dev/podmin/internal/secrets/secretstest"
	"podmin.dev/podmin/internal/state"
)

// fakeUpstream is a real OCI registry serving a two-platform index as
// cloudflare/cloudflared, counting the requests it answers.
type fakeUpstream struct {
	host     string
	requests atomic.Int64
	pin      openv.PinnedImage
}

func startFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	f := &fakeUpstream{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	f.host = u.Host
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := random.Image(512, 2)
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	ref, err := name.ParseReference(f.host + "/cloudflare/cloudflared:2025.11.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	f.pin = openv.PinnedImage{Platform: platformImage("cloudflared"), Tag: "2025.11.1", Digest: d.String()}
	f.requests.Store(0)
	return f
}

func TestPinnedCloudflaredIsAPlatformImage(t *testing.T) {
	pin := Cloudflared()
	if pin.Platform.Source != "docker.io/cloudflare/cloudflared" {
		t.Fatalf("source %q", pin.Platform.Source)
	}
	if _, err := v1.NewHash(pin.Digest); err != nil {
		t.Fatalf("pinned digest: %v", err)
	}
	want := "registry.podmin.internal/mirror/docker.io/cloudflare/cloudflared:" + pin.Tag + "@" + pin.Digest
	if pin.Reference() != want {
		t.Fatalf("reference %q, want %q", pin.Reference(), want)
	}
	data, err := CloudflaredManifest("workers", secrets.ParameterStore)
	if err != nil || !strings.Contains(string(data), want) {
		t.Fatalf("manifest does not run the pinned image: %v\n%s", err, data)
	}
	if _, err := CloudflaredManifest("workers", "vault"); err == nil {
		t.Fatal("a provider that cannot mount was accepted")
	}
}

// localEnv connects a local cluster "demo" whose only secrets provider is
// the local store.
func localEnv(t *testing.T) *openv.Env {
	env := openvtest.NewEnv(t)
	if _, err := ctxops.Connect(t.Context(), env, ctxops.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: filepath.Join(t.TempDir(), "bucket"), SecretsProvider: "local"}); err != nil {
		t.Fatal(err)
	}
	env.Secrets = func(_ context.Context, _ contexts.Context, provider string) (secrets.Store, error) {
		if provider != secrets.Local {
			return nil, fmt.Errorf("test factory: no provider %q", provider)
		}
		return localsecrets.New(filepath.Join(env.Dirs.Data, "secrets")), nil
	}
	return env
}

// storeTunnelToken stores the cloudflared tunnel token install looks for.
func storeTunnelToken(t *testing.T, env *openv.Env) {
	if _, err := secretops.CreateSecret(t.Context(), env, secretops.SecretValueOptions{SecretOptions: secretops.SecretOptions{Key: "tunnel-token", For: "cloudflared", Namespace: "platform-cloudflared"}, Value: secrets.Value("t")}); err != nil {
		t.Fatal(err)
	}
}

func TestInstallCloudflaredLocal(t *testing.T) {
	runInstallScenario(t, localEnv(t), secrets.Local)
}

func TestInstallCloudflaredVersityGW(t *testing.T) {
	srv := objstoretest.UseVersityGW(t)
	env := openvtest.NewEnv(t)
	ctx := t.Context()
	if _, err := ctxops.Connect(ctx, env, ctxops.ConnectOptions{Cluster: "demo", Provider: "aws", Bucket: "demo-state", Region: srv.Region}); err != nil {
		t.Fatal(err)
	}
	fake := secretstest.NewFakeSSM(t)
	creds := credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", "")
	env.Secrets = func(_ context.Context, _ contexts.Context, provider string) (secrets.Store, error) {
		if provider != secrets.ParameterStore {
			return nil, fmt.Errorf("test factory: no provider %q", provider)
		}
		return parameterstore.New(ssm.New(ssm.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(fake.URL()), Credentials: creds})), nil
	}
	runInstallScenario(t, env, secrets.ParameterStore)
}

// runInstallScenario installs cloudflared twice on a connected cluster
// whose secrets provider is provider, then uninstalls it.
func runInstallScenario(t *testing.T, env *openv.Env, provider string) {
	ctx := t.Context()
	up := startFakeUpstream(t)
	env.UpstreamRegistries = map[string]string{"docker.io": up.host}
	var counts *faultstore.Store
	env.WrapStore = func(s objstore.Store) objstore.Store {
		if counts == nil {
			counts = faultstore.New(s)
		}
		return counts
	}
	opts := InstallCloudflaredOptions{NodeGroup: "edge"}
	var said []string
	env.Progress = func(msg string) { said = append(said, msg) }
	// commits returns the progress lines about the index said since the
	// last call.
	commits := func() []string {
		var c []string
		for _, m := range said {
			if strings.Contains(m, "commit") {
				c = append(c, m)
			}
		}
		said = nil
		return c
	}

	// No token: refused before any bucket or registry request.
	_, err := installCloudflared(ctx, env, opts, up.pin)
	wantCmd := "podmin secret create tunnel-token --for cloudflared -n platform-cloudflared --provider " + provider
	if !errors.Is(err, ErrTokenMissing) || !strings.Contains(err.Error(), wantCmd) || !strings.Contains(err.Error(), "/demo/platform-cloudflared/cloudflared/tunnel-token") {
		t.Fatalf("install without a token: %v", err)
	}
	if counts != nil || up.requests.Load() != 0 {
		t.Fatalf("install without a token made requests: bucket %v, registry %d", counts, up.requests.Load())
	}
	if _, err := secretops.CreateSecret(ctx, env, secretops.SecretValueOptions{
		SecretOptions: secretops.SecretOptions{Key: "tunnel-token", For: "cloudflared", Namespace: "platform-cloudflared"},
		Value:         secrets.Value("eyJhIjoidG9rZW4ifQ"),
	}); err != nil {
		t.Fatal(err)
	}

	first, err := installCloudflared(ctx, env, opts, up.pin)
	if err != nil {
		t.Fatal(err)
	}
	if first.Action != "created" || first.Mirror.Action != "mirrored" || first.Mirror.Uploaded == 0 ||
		first.Mirror.Repository != "mirror/docker.io/cloudflare/cloudflared" || first.Image != up.pin.Reference() {
		t.Fatalf("first install %+v", first)
	}
	if up.requests.Load() == 0 {
		t.Fatal("the first install did not fetch from the upstream registry")
	}
	if c := commits(); len(c) != 1 || !strings.Contains(c[0], "committed edge/cloudflared to bucket") || !strings.HasSuffix(c[0], "(created)") {
		t.Fatalf("first install said %q about the index", c)
	}
	idx, err := counts.Get(ctx, "mirror/docker.io/cloudflare/cloudflared/index.json", objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := oci.ParseIndex(idx.Data)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := oci.FindTag(m, "2025.11.1"); !ok || d.Digest.String() != up.pin.Digest {
		t.Fatalf("mirror index %s", idx.Data)
	}

	// Second install: reads of the mirror index, of the image's index and
	// two manifests (verified), a Head for each of its 2 configs and 4
	// layers, two reads of the deployment index (the ownership check and
	// the commit's) and one Head proving the Pod payload intact; no write,
	// no request upstream.
	counts.ResetCounts()
	up.requests.Store(0)
	second, err := installCloudflared(ctx, env, opts, up.pin)
	if err != nil {
		t.Fatal(err)
	}
	if second.Action != "unchanged" || second.Mirror.Action != "reused" || second.Pod != first.Pod {
		t.Fatalf("second install %+v", second)
	}
	if c := counts.Counts(); c.Writes() != 0 || c.Get != 6 || c.Head != 7 || c.Total() != 13 || up.requests.Load() != 0 {
		t.Fatalf("second install made %+v bucket requests and %d registry requests: want 6 reads and 7 Heads", c, up.requests.Load())
	}
	if c := commits(); len(c) != 0 {
		t.Fatalf("an install that committed nothing said %q", c)
	}

	// The entry in place does not vouch for its payload: a removed or
	// damaged Pod payload is rewritten by the next install, and the index
	// is left alone.
	for _, damage := range []string{"removed", "damaged"} {
		if damage == "removed" {
			err = counts.Delete(ctx, first.Pod, "")
		} else {
			_, err = counts.Put(ctx, first.Pod, []byte("not the Pod"))
		}
		if err != nil {
			t.Fatal(err)
		}
		before, err := counts.Head(ctx, state.IndexPath)
		if err != nil {
			t.Fatal(err)
		}
		again, err := installCloudflared(ctx, env, opts, up.pin)
		if err != nil {
			t.Fatalf("install after the payload was %s: %v", damage, err)
		}
		if again.Action != "repaired" || again.Pod != first.Pod {
			t.Fatalf("install after the payload was %s: %+v", damage, again)
		}
		if c := commits(); len(c) != 1 || !strings.HasSuffix(c[0], "(repaired)") {
			t.Fatalf("install after the payload was %s said %q", damage, c)
		}
		if after, err := counts.Head(ctx, state.IndexPath); err != nil || after.ETag != before.ETag {
			t.Fatalf("install after the payload was %s wrote the index: ETag %s, then %s (%v)", damage, before.ETag, after.ETag, err)
		}
		obj, err := counts.Get(ctx, first.Pod, objstore.GetOptions{})
		if err != nil || state.VerifyPayload(first.Pod, obj.Data) != nil {
			t.Fatalf("payload after the install that found it %s: %v", damage, err)
		}
	}

	// Neither does the mirror's tag vouch for the image's blobs: a removed
	// layer and a damaged manifest are written again from the local image
	// store, with no request upstream.
	layout, err := state.MirrorLayout("docker.io", "cloudflare/cloudflared")
	if err != nil {
		t.Fatal(err)
	}
	top, err := oci.ParseIndex(mustGet(t, counts, layout.IndexFile()))
	if err != nil {
		t.Fatal(err)
	}
	topDesc, _ := oci.FindTag(top, "2025.11.1")
	var image v1.IndexManifest
	mustUnmarshal(t, mustGet(t, counts, mustBlobPath(t, layout, topDesc.Digest)), &image)
	var manifest v1.Manifest
	mustUnmarshal(t, mustGet(t, counts, mustBlobPath(t, layout, image.Manifests[0].Digest)), &manifest)
	for _, damage := range []struct{ what, key string }{
		{"a removed layer", mustBlobPath(t, layout, manifest.Layers[1].Digest)},
		{"a damaged manifest", mustBlobPath(t, layout, image.Manifests[0].Digest)},
	} {
		if damage.what == "a removed layer" {
			err = counts.Delete(ctx, damage.key, "")
		} else {
			_, err = counts.Put(ctx, damage.key, []byte(`{"not":"the manifest"}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		up.requests.Store(0)
		again, err := installCloudflared(ctx, env, opts, up.pin)
		if err != nil {
			t.Fatalf("install after %s: %v", damage.what, err)
		}
		if again.Mirror.Action != "repaired" || again.Mirror.Uploaded != 1 || again.Action != "unchanged" || up.requests.Load() != 0 {
			t.Fatalf("install after %s: %+v, %d registry requests", damage.what, again, up.requests.Load())
		}
		if problems, err := oci.CheckPublished(ctx, counts, layout, topDesc); err != nil || len(problems) != 0 {
			t.Fatalf("mirror after the install that found %s: %q, %v", damage.what, problems, err)
		}
		if next, err := installCloudflared(ctx, env, opts, up.pin); err != nil || next.Mirror.Action != "reused" {
			t.Fatalf("install after the repair of %s: %+v, %v", damage.what, next, err)
		}
	}

	list, err := deployments.List(ctx, env)
	if err != nil || len(list) != 1 || list[0].Origin != "cloudflared" || list[0].Namespace != "platform-cloudflared" || list[0].NodeGroup != "edge" {
		t.Fatalf("list %+v, %v", list, err)
	}

	pv, err := deployments.Preview(ctx, env, deployments.PreviewOptions{NodeGroup: "edge"})
	if err != nil || len(pv.Files) != 1 {
		t.Fatalf("preview %+v, %v", pv, err)
	}
	f := pv.Files[0]
	if len(f.Mounts) != 1 || f.Mounts[0].Provider != provider || strings.Join(f.Mounts[0].Keys, ",") != "tunnel-token" {
		t.Fatalf("mounts %+v", f.Mounts)
	}
	for _, want := range []string{
		"runAsNonRoot: true", "readOnlyRootFilesystem: true", "allowPrivilegeEscalation: false", "privileged: false",
		"- ALL", "limits:", "memory: 256Mi", "cpu: 500m", "image: " + up.pin.Reference(),
		"--token-file", "/var/run/podmin/" + provider + "/tunnel-token", "mountPath: /var/run/podmin/" + provider,
		"namespace: platform-cloudflared", "podmin.dev/origin: cloudflared",
	} {
		if !strings.Contains(f.YAML, want) {
			t.Errorf("static Pod lacks %q:\n%s", want, f.YAML)
		}
	}
	if strings.Contains(f.YAML, "eyJhIjoidG9rZW4ifQ") {
		t.Fatal("the token value is in the static Pod")
	}
	agentWritesHardenedPod(t, env, counts, provider, f.YAML)

	del, err := UninstallCloudflared(ctx, env, UninstallCloudflaredOptions{NodeGroup: "edge"})
	if err != nil || del.Action != "deleted" {
		t.Fatalf("uninstall %+v, %v", del, err)
	}
	if list, _ := deployments.List(ctx, env); len(list) != 0 {
		t.Fatalf("after uninstall: %+v", list)
	}
	if del, err := UninstallCloudflared(ctx, env, UninstallCloudflaredOptions{NodeGroup: "edge"}); err != nil || del.Action != "absent" {
		t.Fatalf("second uninstall %+v, %v", del, err)
	}
}

// agentWritesHardenedPod runs the node's static-Pod reconciler against the
// bucket and checks the file it writes: preview's, with the token mounted
// from the secrets provider.
func agentWritesHardenedPod(t *testing.T, env *openv.Env, store objstore.Store, provider, preview string) {
	t.Helper()
	ctx := t.Context()
	s, err := env.Secrets(ctx, contexts.Context{}, provider)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	r, err := staticpod.New(staticpod.Options{
		Store: store, Cluster: "demo", NodeGroup: "edge", Root: root,
		Secrets: map[string]mounts.Reader{provider: mounts.StoreReader{Store: s}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(filepath.Join(root, "etc", "podmin", "manifests", "cloudflared.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The node adds the incarnation it drew for this run of the revision.
	incarnation := regexp.MustCompile(`(?m)^\s*podmin\.dev/incarnation: [0-9a-f]{16}\n`)
	if !incarnation.Match(written) || string(incarnation.ReplaceAll(written, nil)) != preview {
		t.Fatalf("the agent wrote another Pod than preview shows (but for its incarnation):\n%s\n---\n%s", written, preview)
	}
	token, err := os.ReadFile(filepath.Join(root, "run", "podmin", "workloads", "cloudflared", "secrets", provider, "tunnel-token"))
	if err != nil || string(token) != "eyJhIjoidG9rZW4ifQ" {
		t.Fatalf("mounted token: %q, %v", token, err)
	}
}

func TestCloudflaredLeavesAUsersDeploymentAlone(t *testing.T) {
	env := localEnv(t)
	ctx := t.Context()
	if _, err := deployments.Deploy(ctx, env, deployments.DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "cloudflared", NodeGroup: "edge", Images: []string{"mine:v1"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := UninstallCloudflared(ctx, env, UninstallCloudflaredOptions{NodeGroup: "edge"})
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), `was not created by "podmin install cloudflared"`) {
		t.Fatalf("uninstall of a user's deployment: %v", err)
	}
	storeTunnelToken(t, env)
	up := startFakeUpstream(t)
	env.UpstreamRegistries = map[string]string{"docker.io": up.host}
	if _, err := installCloudflared(ctx, env, InstallCloudflaredOptions{NodeGroup: "edge"}, up.pin); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("install over a user's deployment: %v", err)
	}
	if up.requests.Load() != 0 {
		t.Fatal("a refused install mirrored the image first")
	}
	if list, _ := deployments.List(ctx, env); len(list) != 1 {
		t.Fatalf("the user's deployment was removed: %+v", list)
	}
}

func TestInstallCloudflaredRefusesAWrongUpstreamDigest(t *testing.T) {
	env := localEnv(t)
	ctx := t.Context()
	storeTunnelToken(t, env)
	up := startFakeUpstream(t)
	env.UpstreamRegistries = map[string]string{"docker.io": up.host}
	pin := up.pin
	pin.Digest = "sha256:" + strings.Repeat("0", 64)
	if _, err := installCloudflared(ctx, env, InstallCloudflaredOptions{NodeGroup: "edge"}, pin); err == nil {
		t.Fatal("an upstream without the pinned digest was mirrored")
	}
	if list, _ := deployments.List(ctx, env); len(list) != 0 {
		t.Fatalf("a failed mirror committed %+v", list)
	}
}

func TestInstallCloudflaredRefusesATokenScheduledForDeletion(t *testing.T) {
	se := newSecretsEnv(t)
	ctx := t.Context()
	opts := secretops.SecretOptions{Key: "tunnel-token", For: "cloudflared", Namespace: "platform-cloudflared", Provider: secrets.SecretsManager}
	if _, err := secretops.CreateSecret(ctx, se, secretops.SecretValueOptions{SecretOptions: opts, Value: secrets.Value("token-value")}); err != nil {
		t.Fatal(err)
	}
	if _, err := secretops.DeleteSecret(ctx, se, opts); err != nil {
		t.Fatal(err)
	}
	var requests int
	se.WrapStore = func(s objstore.Store) objstore.Store { requests++; return s }
	_, err := InstallCloudflared(ctx, se, InstallCloudflaredOptions{NodeGroup: "edge", Provider: secrets.SecretsManager})
	if !errors.Is(err, ErrTokenMissing) || !strings.Contains(err.Error(), "podmin secret restore tunnel-token --for cloudflared -n platform-cloudflared --provider aws-secrets-manager") {
		t.Fatalf("install with a token scheduled for deletion: %v", err)
	}
	if requests != 0 {
		t.Fatal("the bucket was opened before the token check")
	}
}

func mustGet(t *testing.T, store objstore.Store, key string) []byte {
	t.Helper()
	obj, err := store.Get(t.Context(), key, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj.Data
}

func mustBlobPath(t *testing.T, layout state.OCILayout, d v1.Hash) string {
	t.Helper()
	key, err := layout.BlobPath(d.String())
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// A manifest damaged without changing its size, on a store that knows no
// content digests, is found by the check (which reads it) but skipped by
// the push (which only Heads it): the install says the mirror is still
// damaged instead of claiming a repair.
func TestInstallCloudflaredSaysWhenTheMirrorStaysDamaged(t *testing.T) {
	ctx := t.Context()
	env := localEnv(t)
	up := startFakeUpstream(t)
	env.UpstreamRegistries = map[string]string{"docker.io": up.host}
	env.WrapStore = objstoretest.WithoutContentDigests
	if _, err := secretops.CreateSecret(ctx, env, secretops.SecretValueOptions{
		SecretOptions: secretops.SecretOptions{Key: "tunnel-token", For: "cloudflared", Namespace: "platform-cloudflared"},
		Value:         secrets.Value("eyJhIjoidG9rZW4ifQ"),
	}); err != nil {
		t.Fatal(err)
	}
	opts := InstallCloudflaredOptions{NodeGroup: "edge"}
	if _, err := installCloudflared(ctx, env, opts, up.pin); err != nil {
		t.Fatal(err)
	}
	_, store, err := env.OpenCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := state.MirrorLayout("docker.io", "cloudflare/cloudflared")
	if err != nil {
		t.Fatal(err)
	}
	h, err := v1.NewHash(up.pin.Digest)
	if err != nil {
		t.Fatal(err)
	}
	var image v1.IndexManifest
	mustUnmarshal(t, mustGet(t, store, mustBlobPath(t, layout, h)), &image)
	key := mustBlobPath(t, layout, image.Manifests[0].Digest)
	data := mustGet(t, store, key)
	data[len(data)/2] ^= 0x01
	if _, err := store.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	_, err = installCloudflared(ctx, env, opts, up.pin)
	if err == nil || !strings.Contains(err.Error(), "still cannot serve") || !strings.Contains(err.Error(), image.Manifests[0].Digest.String()+" does not match its digest") {
		t.Fatalf("install over a manifest the push cannot see is damaged: %v", err)
	}
}

// newSecretsEnv is a connected local cluster "demo" whose secrets factory
// opens the local store and the real AWS Secrets Manager client pointed at
// a fake.
func newSecretsEnv(t *testing.T) *openv.Env {
	t.Helper()
	env := openvtest.NewEnv(t)
	if _, err := ctxops.Connect(t.Context(), env, ctxops.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo-bucket"}); err != nil {
		t.Fatal(err)
	}
	fake := secretstest.NewFakeSecretsManager(t)
	creds := credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", "")
	env.Secrets = func(_ context.Context, c contexts.Context, provider string) (secrets.Store, error) {
		switch provider {
		case secrets.Local:
			return localsecrets.New(filepath.Join(env.Dirs.Data, "secrets")), nil
		case secrets.SecretsManager:
			return secretsmanager.New(sm.New(sm.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(fake.URL()), Credentials: creds})), nil
		}
		return nil, fmt.Errorf("test factory: no provider %q", provider)
	}
	return env
}
