// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/builtins/deps/depstest"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/infra/ec2test"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/secrets/parameterstore"
	"podmin.dev/podmin/internal/secrets/secretstest"
)

// planOnlyTool answers like OpenTofu/Terraform and logs its subcommands.
const planOnlyTool = `#!/bin/bash
echo "$* lock=$([[ " $* " == *" -lock=false "* ]] && echo off || echo on)" >> "$FAKE_TF_LOG"
case "$1" in
version) echo '{"terraform_version":"1.11.4"}' ;;
init) ;;
plan) echo "Plan: 3 to add, 0 to change, 0 to destroy."; echo plan > podmin.tfplan; exit 2 ;;
show) echo '{"resource_changes":[{"change":{"actions":["create"]}},{"change":{"actions":["create"]}},{"change":{"actions":["create"]}}]}' ;;
*) exit 64 ;;
esac
`

// TestAWSSetupDryRunPlansAndNeverApplies runs setup on an AWS context over
// the recording boundaries: the checks and the plan are real (the plan
// without the state lock), apply is recorded, and nothing is written.
func TestAWSSetupDryRunPlansAndNeverApplies(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("bash is not installed")
	}
	srv := objstoretest.StartVersityGW(t)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_S3": srv.Endpoint, "AWS_ACCESS_KEY_ID": srv.AccessKey,
		"AWS_SECRET_ACCESS_KEY": srv.SecretKey, "AWS_REGION": srv.Region, "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none")} {
		t.Setenv(k, v)
	}
	env := newEnv(t)
	env.Providers = map[string]cloud.Provider{"aws": aws.Provider{}}
	fssm := secretstest.NewFakeSSM(t)
	creds := credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", "")
	env.Secrets = func(context.Context, contexts.Context, string) (secrets.Store, error) {
		return parameterstore.New(ssm.New(ssm.Options{Region: srv.Region, BaseEndpoint: awssdk.String(fssm.URL()), Credentials: creds})), nil
	}
	tool, log := filepath.Join(t.TempDir(), "tofu"), filepath.Join(t.TempDir(), "calls")
	if err := os.WriteFile(tool, []byte(planOnlyTool), 0o755); err != nil {
		t.Fatal(err)
	}
	ec2 := ec2test.NewIn(srv.Region).Client(t)
	// The real node bootstrap, over the recorded upstream releases: the
	// dependency step runs against the dry run's bucket overlay.
	up := depstest.NewUpstream(t)
	env.Infrastructure = func(_ context.Context, h lifecycle.Host, c contexts.Context) (builtins.ClusterInfra, error) {
		boot := &lifecycle.AWSBootstrap{Host: h, EC2: ec2, Client: up.Server.Client(), Resolver: up.Resolver(),
			Mirror: depstest.MirrorImage, Check: depstest.CheckImage, ImageManifestURL: up.ImageManifestURL}
		return &lifecycle.AWSInfra{Host: h, Context: c, EC2: ec2, Bootstrap: boot,
			Runner: &infra.Runner{CacheDir: env.Dirs.Cache, Environ: []string{"PATH=" + os.Getenv("PATH"), "FAKE_TF_LOG=" + log},
				LookupEnv: func(k string) (string, bool) { return tool, k == "PODMIN_TF_CMD" }}}, nil
	}
	ctx := t.Context()
	if _, err := env.Connect(ctx, builtins.ConnectOptions{Cluster: "demo", Provider: "aws", Bucket: "demo-state"}); err != nil {
		t.Fatal(err)
	}

	rec, denv, err := dryRun(env)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	res, err := denv.Setup(ctx, builtins.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Add != 3 {
		t.Fatalf("plan summary %+v", res.Plan)
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(calls); strings.Contains(got, "apply") || !strings.Contains(got, "plan -input=false") || strings.Contains(got, "backend-config=bucket=demo-state -backend-config=key=tfstate/podmin.tfstate -backend-config=region="+srv.Region) == false ||
		strings.Count(got, "-lock=false") != 2 {
		t.Fatalf("tool calls in a dry run:\n%s", got)
	}
	changes := summary(rec.Changes(0, 0))
	for _, want := range []string{"created secret /demo/_system/workload-ca-key", "created secret /demo/_system/cluster-ca",
		"created object tfstate/podmin.auto.tfvars.json", "updated infrastructure cluster demo",
		"created object dependencies/manifest.json"} {
		if !slices.Contains(changes, want) {
			t.Errorf("the plan lacks %q: %v", want, changes)
		}
	}
	// Nothing was written: no secret, no object, no module or dependency
	// in the real cache.
	if _, err := os.Stat(infra.ModuleDir(env.Dirs.Cache, "demo")); !os.IsNotExist(err) {
		t.Errorf("the module was written to the real cache: %v", err)
	}
	if _, err := os.Stat(deps.CacheDir(env.Dirs.Cache)); !os.IsNotExist(err) {
		t.Errorf("dependencies were downloaded into the real cache: %v", err)
	}
	b, err := s3store.New(ctx, s3store.Options{Bucket: "demo-state", Region: srv.Region})
	if err != nil {
		t.Fatal(err)
	}
	if objs, err := objstore.ListAll(ctx, b, ""); err != nil || len(objs) != 0 {
		t.Errorf("the bucket holds %v (%v)", objs, err)
	}
	s, _ := env.Secrets(ctx, contexts.Context{}, secrets.ParameterStore)
	if list, err := s.List(ctx, "demo", secrets.Filter{}); err != nil || len(list) != 0 {
		t.Errorf("secrets %v (%v)", list, err)
	}

	// With the dependencies already fetched into the real cache, a dry
	// run reuses them: nothing is downloaded and the real cache is left
	// as it was.
	if _, err := deps.Fetch(ctx, deps.FetchOptions{Arch: []string{"arm64"}, CacheDir: env.Dirs.Cache,
		Resolver: up.Resolver(), Client: up.Server.Client()}); err != nil {
		t.Fatal(err)
	}
	before, cached := up.Downloaded(), cacheFiles(t, deps.CacheDir(env.Dirs.Cache))
	rec2, denv2, err := dryRun(env)
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Close()
	if _, err := denv2.Setup(ctx, builtins.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if up.Downloaded() != before {
		t.Errorf("the dry run downloaded %d files the real cache holds", up.Downloaded()-before)
	}
	if after := cacheFiles(t, deps.CacheDir(env.Dirs.Cache)); !maps.Equal(after, cached) {
		t.Errorf("the dry run changed the real dependency cache:\n%v\n%v", cached, after)
	}
}

// cacheFiles lists a directory's files with their sizes and times.
func cacheFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprint(info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("cache %s: %d files (%v)", dir, len(out), err)
	}
	return out
}
