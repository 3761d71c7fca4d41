// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/state"
)

// checksEnv is a connected local cluster "demo" with the local secrets
// store and a counter of every bucket request.
type checksEnv struct {
	*openv.Env
	counts *requestCounter
	bucket objstore.Store
	store  *localsecrets.Store
}

func newChecksEnv(t *testing.T) *checksEnv {
	t.Helper()
	ce := &checksEnv{Env: openvtest.NewEnv(t)}
	ce.store = localsecrets.New(filepath.Join(ce.Dirs.Data, "secrets"))
	ce.Secrets = func(context.Context, contexts.Context, string) (secrets.Store, error) { return ce.store, nil }
	ce.counts = connectCounting(t, ce.Env, "local")
	_, b, err := ce.OpenCluster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ce.bucket = b
	return ce
}

// setUp publishes the cluster configuration setup would, with NodeGroup
// workers, and the image index push would, naming hello:v1 by tag and
// digest.
func (ce *checksEnv) setUp(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	if _, err := ce.bucket.Put(ctx, state.TFVarsPath, []byte(`{"version": 1, "cluster": "demo", "provider": "local", "nodegroups": [{"name": "workers", "size": 2}]}`)); err != nil {
		t.Fatal(err)
	}
	index := fmt.Sprintf(`{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": %q, "size": 100, "annotations": {"org.opencontainers.image.ref.name": "v1"}}]}`, helloDigest)
	if _, err := ce.bucket.Put(ctx, "apps/hello/index.json", []byte(index)); err != nil {
		t.Fatal(err)
	}
	n, err := secrets.PodSecret("demo", "default", "web", "db-url")
	if err != nil {
		t.Fatal(err)
	}
	if err := ce.store.Create(ctx, n, secrets.Value("postgres://db")); err != nil {
		t.Fatal(err)
	}
}

const helloDigest = "sha256:" + "ab0c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f80"

func messages(ws []openv.Warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Check + " " + w.Subject + ": " + w.Message
	}
	return out
}

// TestDeployWarnsAboutWhatCanNeverRun deploys, in a cluster setup never
// ran for, an image never pushed with a secret never created: each is a
// warning naming its fix, and Strict refuses before anything is written.
func TestDeployWarnsAboutWhatCanNeverRun(t *testing.T) {
	ce := newChecksEnv(t)
	ctx := t.Context()
	opts := DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}, Secrets: []string{"db-url"}}}
	strict := opts
	strict.Strict = true
	ce.counts.ResetCounts()
	_, err := Deploy(ctx, ce.Env, strict)
	if !errors.Is(err, ErrDeployChecks) {
		t.Fatalf("strict deploy: %v, want ErrDeployChecks", err)
	}
	for _, want := range []string{
		"strict deploy refused workers/web: nothing was written: 3 checks failed: ",
		`cluster demo has no configuration (tfstate/podmin.auto.tfvars.json) in its bucket: setup never ran, so no node runs NodeGroup workers: run "podmin setup" with --nodegroup workers`,
		`image registry.podmin.internal/apps/hello:v1 is not in the cluster registry (the bucket has no apps/hello/index.json), so nodes cannot pull it: run "podmin push hello:v1" for an image built with "podmin build -t hello:v1", or "podmin push SOURCE hello:v1" to copy one from another registry`,
		`secret db-url of Pod default/web is not in the secrets provider local, so the node cannot mount it and the Pod never starts: run "podmin secret create db-url --for web"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("strict deploy error lacks %q:\n%v", want, err)
		}
	}
	if c := ce.counts.Counts(); c.Writes() != 0 || c.Get != 2 || c.Total() != 2 {
		t.Errorf("strict deploy made requests %+v, want the configuration and the image index read, nothing written", c)
	}

	res, err := Deploy(ctx, ce.Env, opts)
	if err != nil || res.Action != "created" {
		t.Fatalf("deploy: %+v %v", res, err)
	}
	want := []string{
		`nodegroup workers: cluster demo has no configuration (tfstate/podmin.auto.tfvars.json) in its bucket: setup never ran, so no node runs NodeGroup workers: run "podmin setup" with --nodegroup workers`,
		`image registry.podmin.internal/apps/hello:v1: image registry.podmin.internal/apps/hello:v1 is not in the cluster registry (the bucket has no apps/hello/index.json), so nodes cannot pull it: run "podmin push hello:v1" for an image built with "podmin build -t hello:v1", or "podmin push SOURCE hello:v1" to copy one from another registry`,
		`secret local:/demo/default/web/db-url: secret db-url of Pod default/web is not in the secrets provider local, so the node cannot mount it and the Pod never starts: run "podmin secret create db-url --for web"`,
	}
	if got := messages(res.Warnings); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Once set up, pushed and created, the same deploy warns about nothing,
	// with one read for each check.
	ce.setUp(t)
	ce.counts.ResetCounts()
	res, err = Deploy(ctx, ce.Env, strict)
	if err != nil || res.Action != "unchanged" || len(res.Warnings) != 0 {
		t.Fatalf("deploy after setup: %+v %v", res, err)
	}
	if c := ce.counts.Counts(); c.Get != 3 || c.Writes() != 0 {
		t.Errorf("checks and an unchanged deploy: requests %+v, want 3 GETs (configuration, image index, deployment index) and the payload HEADs", c)
	}

	for _, tc := range []struct {
		name  string
		opts  DeployOptions
		check string
		want  string
	}{
		{"a NodeGroup setup never configured", DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "wrokers", Images: []string{"hello:v1"}}},
			"nodegroup", `NodeGroup wrokers is not configured in cluster demo (its NodeGroups are workers), so no node runs it: check the name, or run "podmin setup" with --nodegroup wrokers`},
		{"a tag never pushed", DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v2"}}},
			"image", `image registry.podmin.internal/apps/hello:v2 is not in the cluster registry (apps/hello/index.json names no tag v2), so nodes cannot pull it: run "podmin push hello:v2" for an image built with "podmin build -t hello:v2", or "podmin push SOURCE hello:v2" to copy one from another registry`},
		{"a digest never pushed", DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello@sha256:" + strings.Repeat("1", 64)}}},
			"image", `image registry.podmin.internal/apps/hello@sha256:` + strings.Repeat("1", 64) + ` is not in the cluster registry (apps/hello/index.json names no digest sha256:` + strings.Repeat("1", 64) + `), so nodes cannot pull it: push the image with that digest first ("podmin push SOURCE hello")`},
		{"a platform image never mirrored", DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"registry.podmin.internal/mirror/docker.io/cloudflare/cloudflared:2025.1.0"}}},
			"image", `image registry.podmin.internal/mirror/docker.io/cloudflare/cloudflared:2025.1.0 is not in the cluster registry (the bucket has no mirror/docker.io/cloudflare/cloudflared/index.json), so nodes cannot pull it: Podmin mirrors its platform images itself: run "podmin setup" (the pause image) or "podmin install cloudflared"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Deploy(ctx, ce.Env, tc.opts)
			if err != nil || len(res.Warnings) != 1 || res.Warnings[0].Check != tc.check || res.Warnings[0].Message != tc.want {
				t.Fatalf("deploy: %+v %v\nwant one %s warning: %s", res.Warnings, err, tc.check, tc.want)
			}
		})
	}
	// A digest that was pushed passes, by itself and with its tag.
	for _, img := range []string{"hello@" + helloDigest, "hello:v1@" + helloDigest} {
		if res, err := Deploy(ctx, ce.Env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{img}}}); err != nil || len(res.Warnings) != 0 {
			t.Fatalf("deploy %s: %+v %v", img, res.Warnings, err)
		}
	}
}

// TestDeployChecksThatCannotReadSayUnknown: a check whose read fails
// proves nothing either way: it warns that it could not check, and
// Strict refuses.
func TestDeployChecksThatCannotReadSayUnknown(t *testing.T) {
	ce := newChecksEnv(t)
	ctx := t.Context()
	ce.setUp(t)
	boom := errors.New("connection reset")
	ce.WrapStore = func(s objstore.Store) objstore.Store {
		return faultstore.New(s, faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpGet}, Prefix: state.TFVarsPath, Err: boom}))
	}
	ce.Secrets = func(context.Context, contexts.Context, string) (secrets.Store, error) { return nil, boom }
	opts := DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}, Secrets: []string{"db-url"}}}
	res, err := Deploy(ctx, ce.Env, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`nodegroup workers: could not check that NodeGroup workers is configured: read the cluster configuration tfstate/podmin.auto.tfvars.json: Get "tfstate/podmin.auto.tfvars.json": injected fault: connection reset`,
		"secret local:/demo/default/web/db-url: could not check that secret db-url of Pod default/web exists: open secrets provider local: connection reset",
	}
	if got := messages(res.Warnings); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	opts.Strict = true
	if _, err := Deploy(ctx, ce.Env, opts); !errors.Is(err, ErrDeployChecks) || !strings.Contains(err.Error(), "2 checks failed") {
		t.Fatalf("strict deploy with unknown checks: %v", err)
	}
}
