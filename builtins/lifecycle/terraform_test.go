// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/infra/tftest"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
)

// TestAWSSetupReachesTerraformInit runs AWS setup as a first run on a new
// machine would: the recorded EC2 fake answers the checks, the real node
// bootstrap stages the dependencies from the recorded upstream, versitygw
// is the bucket and the S3 backend, and the real terraform binary runs
// with a CLI configuration naming the provider mirror (tftest.Find) and a
// cache without tf-plugins yet. Version and init succeed (providers installed into the
// fresh plugin cache, the backend initialized in the bucket); the plan
// then needs the AWS APIs, which this machine cannot reach, and fails
// before anything is written.
func TestAWSSetupReachesTerraformInit(t *testing.T) {
	tf := tftest.Find(t)
	ae := newAWSEnv(t)
	ae.realBootstrap(t)
	boot := ae.bootstrap
	home := t.TempDir()
	var out bytes.Buffer
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": home,
		"AWS_ACCESS_KEY_ID": ae.srv.AccessKey, "AWS_SECRET_ACCESS_KEY": ae.srv.SecretKey, "AWS_REGION": ae.srv.Region,
		"AWS_ENDPOINT_URL_S3": ae.srv.Endpoint, "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1",
		"AWS_CONFIG_FILE": filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "none"),
	}
	if tf.CLIConfig != "" {
		env["TF_CLI_CONFIG_FILE"] = tf.CLIConfig // else the registry
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	client := ae.ec2.Client(t)
	ae.Infrastructure = func(_ context.Context, h lifecycle.Host, c contexts.Context) (builtins.ClusterInfra, error) {
		return &lifecycle.AWSInfra{Host: h, Context: c, EC2: client, Bootstrap: boot(h),
			Now: func() time.Time { return time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC) },
			Runner: &infra.Runner{CacheDir: h.CacheDir(), Environ: environ, Output: &out,
				LookupEnv: func(k string) (string, bool) {
					if k == "PODMIN_TF_CMD" {
						return tf.Bin, true
					}
					v, ok := env[k]
					return v, ok
				}}}, nil
	}
	plugins := filepath.Join(ae.Dirs.Cache, "tf-plugins")
	if _, err := os.Stat(plugins); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the cache is not fresh: %v", err)
	}
	ctx := t.Context()
	confirmed := false
	_, err := ae.Setup(ctx, lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"default"},
		Confirm: func(lifecycle.PlanSummary) error { confirmed = true; return nil }})
	log := out.String()
	if !strings.Contains(log, "Terraform has been successfully initialized!") {
		t.Fatalf("setup did not get through terraform init (%v):\n%s", err, log)
	}
	t.Logf("terraform init succeeded with a fresh cache; setup then stopped at: %v", err)
	if providers, _ := filepath.Glob(filepath.Join(plugins, "registry.terraform.io", "hashicorp", "aws", "*")); len(providers) == 0 {
		t.Errorf("the AWS provider was not installed into the fresh plugin cache %s", plugins)
	}
	// The fake keys open no AWS account (and this machine may have no
	// route to AWS at all): the plan fails, as a tool failure, before the
	// confirmation, and nothing is written.
	if !errors.Is(err, infra.ErrTool) || !strings.Contains(err.Error(), "plan exited with status") || confirmed ||
		!strings.Contains(log, "retrieving caller identity from STS") {
		t.Fatalf("setup after init: %v (confirmed %v); the plan must fail only for want of the AWS APIs:\n%s", err, confirmed, log)
	}
	b := rawBucket(t, ae.srv, "demo-state")
	if _, err := b.Head(ctx, "tfstate/podmin.auto.tfvars.json"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("the cluster configuration was published before a plan: %v", err)
	}
	if ae.secret(t, "workload-ca-key") != "" {
		t.Error("a CA secret was stored before a plan")
	}
	if _, err := os.Stat(filepath.Join(infra.ModuleDir(ae.Dirs.Cache, "demo"), ".terraform")); err != nil {
		t.Errorf("the module was not initialized: %v", err)
	}
}
