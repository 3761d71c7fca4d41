// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/infra/tftest"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// TestRunnerRealTerraform runs the real terraform binary through the
// runner as setup does on a fresh machine: the plugin cache directory does
// not exist yet, TF_CLI_CONFIG_FILE names a missing file (Terraform warns
// on standard error), the S3 backend is a real S3-compatible server, and
// the provider comes from Terraform's implied local mirror.
func TestRunnerRealTerraform(t *testing.T) {
	tf := tftest.Find(t)
	srv := objstoretest.StartVersityGW(t)
	bucket := s3storetest.NewBucket(t, srv)
	home, cache := t.TempDir(), filepath.Join(t.TempDir(), "podmin")
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": home,
		"TF_CLI_CONFIG_FILE":          filepath.Join(home, "missing.tfrc"),
		"AWS_ACCESS_KEY_ID":           srv.AccessKey,
		"AWS_SECRET_ACCESS_KEY":       srv.SecretKey,
		"AWS_REGION":                  srv.Region,
		"AWS_ENDPOINT_URL_S3":         srv.Endpoint,
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             filepath.Join(home, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "none"),
	}
	if data := tftest.ImpliedMirror(t, tf); data != "" {
		env["XDG_DATA_HOME"] = data
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	dir := ModuleDir(cache, "demo")
	if _, err := Write(dir, readFixture(t, filepath.Join("testdata", "shared-nat64.tfvars.json"))); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := &Runner{Dir: dir, Bucket: bucket.Name(), Region: srv.Region, CacheDir: cache, Environ: environ, Output: &out,
		LookupEnv: func(k string) (string, bool) {
			if k == "PODMIN_TF_CMD" {
				return tf.Bin, true
			}
			v, ok := env[k]
			return v, ok
		}}
	ctx := t.Context()
	if err := r.CheckVersion(ctx); err != nil {
		t.Fatalf("version: %v\n%s", err, out.String())
	}
	if err := r.Init(ctx); err != nil {
		t.Fatalf("init: %v\n%s", err, out.String())
	}
	if err := r.Validate(ctx); err != nil {
		t.Fatalf("validate: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Unable to open CLI configuration file") {
		t.Errorf("Terraform's warning about the missing CLI configuration was not shown:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "Success! The configuration is valid.") {
		t.Errorf("validate printed no success:\n%s", out.String())
	}
	providers, err := filepath.Glob(filepath.Join(cache, "tf-plugins", "registry.terraform.io", "hashicorp", "aws", "*"))
	if err != nil || len(providers) == 0 {
		t.Fatalf("the AWS provider is not in the plugin cache %s (%v)", filepath.Join(cache, "tf-plugins"), err)
	}
}
