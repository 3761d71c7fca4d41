// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/builtins/deps/depstest"
	"podmin.dev/podmin/builtins/infra/tftest"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/cloud/aws/mototest"
	"podmin.dev/podmin/internal/oci"
)

// motoCLI runs a podmin binary built at version 1.4.0 against a moto
// server, with its own home directory, Terraform from the provider mirror
// and every dependency fetched from a test upstream through the
// PODMIN_DEPENDENCY_MIRROR setting.
type motoCLI struct {
	t   *testing.T
	bin string
	env []string
}

// run runs podmin with args and returns its standard output; a failure
// fails the test with both outputs.
func (c *motoCLI) run(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("podmin %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func (c *motoCLI) try(args ...string) (string, string, error) {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// setupOut and destroyOut are the fields of setup's and destroy's -o json
// the test reads.
type setupOut struct {
	Plan    lifecycle.PlanSummary `json:"plan"`
	Applied bool                  `json:"applied"`
}

type destroyOut struct {
	BucketDeleted  bool `json:"bucketDeleted"`
	BucketKept     bool `json:"bucketKept"`
	ContextRemoved bool `json:"contextRemoved"`
}

// setup runs podmin setup -y -o json with args and returns its result.
func (c *motoCLI) setup(args ...string) setupOut {
	c.t.Helper()
	var res setupOut
	out := c.run(append(append([]string{"setup"}, args...), "-y", "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		c.t.Fatalf("setup -o json: %v\n%s", err, out)
	}
	return res
}

// destroy runs podmin destroy -y -o json and returns its result.
func (c *motoCLI) destroy() destroyOut {
	c.t.Helper()
	var res destroyOut
	out := c.run("destroy", "-y", "-o", "json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		c.t.Fatalf("destroy -o json: %v\n%s", err, out)
	}
	return res
}

// buildPodmin builds the podmin binary of this checkout as version 1.4.0,
// the version the test upstream publishes an agent for.
func buildPodmin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "podmin")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-o", bin,
		"-ldflags", "-X podmin.dev/podmin/internal/version.Version=1.4.0", "./cmd/podmin")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build podmin: %v\n%s", err, out)
	}
	return bin
}

// newMotoCLI gives the binary a home of its own (its contexts, cache and
// module directory) whose image store already holds the pause image setup
// mirrors into the bucket, as if pulled before: moto has no registry.
func newMotoCLI(t *testing.T, bin string, srv *mototest.Server, tf tftest.Terraform, mirror string) *motoCLI {
	home := t.TempDir()
	var env []string
	for _, kv := range tf.Env() {
		if !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(append(env, srv.Env()...), "HOME="+home, deps.MirrorEnv+"="+mirror)
	store := oci.NewStore(filepath.Join(home, ".cache", "podmin", "images"))
	idx, err := random.Index(512, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Write(context.Background(), "registry.k8s.io/pause", idx, "3.10.2"); err != nil {
		t.Fatal(err)
	}
	return &motoCLI{t: t, bin: bin, env: env}
}

// noChange fails unless a setup applied nothing: moto reads back what the
// module applied (launcher.py corrects what it would not keep), so any
// change is the module's.
func noChange(t *testing.T, what string, res setupOut) {
	t.Helper()
	p := res.Plan
	t.Logf("moto lifecycle: %s: plan %d to add, %d to change, %d to destroy", what, p.Add, p.Change, p.Destroy)
	if p.Add != 0 || p.Change != 0 || p.Destroy != 0 {
		t.Errorf("%s: the plan is %d to add, %d to change, %d to destroy, want none:\n%s", what, p.Add, p.Change, p.Destroy, strings.Join(p.Steps, "\n"))
	}
}

// gone fails unless nothing of cluster's is left in moto.
func gone(t *testing.T, srv *mototest.Server, cluster string) {
	t.Helper()
	left, err := srv.Leftovers(context.Background(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("destroy left %d resources of cluster %s: %s", len(left), cluster, strings.Join(left, ", "))
	}
}

// TestLifecycleAgainstMoto runs the AWS lifecycle through the podmin binary
// against moto. A cluster on a new VPC: setup, setup again unchanged, a
// NodeGroup added, one resized, deploy and status, destroy, which leaves
// nothing of Podmin's and keeps a parameter it did not make. A cluster on
// a reused VPC in a bucket made beforehand: setup, setup again unchanged,
// a destroy from another context connected to the bucket keeps the bucket,
// the VPC and every secret, and its own context's destroy then removes
// what is Podmin's and keeps the rest.
func TestLifecycleAgainstMoto(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the moto tier runs setup and destroy for real")
	}
	if why := mototest.Available(); why != "" {
		t.Skip(why)
	}
	tf := tftest.Find(t)
	srv := mototest.Start(t)
	up := depstest.NewUpstream(t)
	bin := buildPodmin(t)
	ctx := context.Background()
	region := mototest.Region
	// A parameter of the cluster's name Podmin did not make.
	for _, name := range []string{"/demo/foreign", "/reuse/foreign"} {
		if _, err := srv.JSON(ctx, "ssm", "AmazonSSM.PutParameter", map[string]any{"Name": name, "Value": "kept", "Type": "SecureString"}); err != nil {
			t.Fatal(err)
		}
	}
	timed := func(what string, f func()) {
		start := time.Now()
		f()
		t.Logf("moto lifecycle: %s %.1f s", what, time.Since(start).Seconds())
	}

	begin := time.Now()
	defer func() { t.Logf("moto lifecycle: all steps %.1f s", time.Since(begin).Seconds()) }()
	c := newMotoCLI(t, bin, srv, tf, up.Server.URL)
	c.run("connect", "demo", "--provider", "aws", "--bucket", "demo-state", "--region", region)
	ng := "default,size=1,instance-type=t4g.small,zone=us-west-2a"
	timed("setup, new VPC", func() {
		if res := c.setup("--vpc-cidr", "10.0.0.0/16", "--nodegroup", ng); !res.Applied || res.Plan.Add == 0 {
			t.Fatalf("first setup: applied %v, plan %+v", res.Applied, res.Plan)
		}
	})
	timed("setup again, unchanged", func() { noChange(t, "setup again", c.setup("--vpc-cidr", "10.0.0.0/16", "--nodegroup", ng)) })
	extra := "extra,size=1,instance-type=t4g.small,zone=us-west-2b"
	timed("setup, a NodeGroup added", func() {
		if res := c.setup("--vpc-cidr", "10.0.0.0/16", "--nodegroup", ng, "--nodegroup", extra); res.Plan.Add == 0 || res.Plan.Destroy != 0 {
			t.Errorf("adding a NodeGroup: plan %+v, want additions only", res.Plan)
		}
	})
	timed("setup, a NodeGroup resized", func() {
		res := c.setup("--vpc-cidr", "10.0.0.0/16", "--nodegroup", "default,size=2,instance-type=t4g.small,zone=us-west-2a", "--nodegroup", extra)
		if res.Plan.Change == 0 || res.Plan.Add != 0 || res.Plan.Destroy != 0 {
			t.Errorf("resizing a NodeGroup: plan %+v, want changes only", res.Plan)
		}
	})
	timed("deploy and status", func() {
		c.run("deploy", "web", "-g", "default", "--image", "nginx:1.27", "-o", "json")
		if out := c.run("status", "web", "-g", "default", "-o", "json"); !strings.Contains(out, `"web"`) {
			t.Errorf("status does not name the deployment:\n%s", out)
		}
	})
	timed("destroy, new VPC", func() {
		if res := c.destroy(); !res.BucketDeleted || !res.ContextRemoved {
			t.Errorf("destroy: %+v", res)
		}
	})
	gone(t, srv, "demo")
	if code, err := srv.S3(ctx, "HEAD", "/demo-state", nil); err != nil || code != 404 {
		t.Errorf("the bucket connect created is still there (HTTP %d, %v)", code, err)
	}
	if p, err := srv.Parameters(ctx, "/demo/"); err != nil || len(p) != 1 || p[0] != "/demo/foreign" {
		t.Errorf("parameters of demo after destroy: %v (%v), want only /demo/foreign", p, err)
	}

	// A reused VPC and a bucket made beforehand.
	out, err := srv.Query(ctx, "ec2", "CreateVpc", map[string]string{"CidrBlock": "10.1.0.0/16", "AmazonProvidedIpv6CidrBlock": "true"})
	if err != nil {
		t.Fatal(err)
	}
	vpc := mototest.Values(out, "vpcId")[0]
	for _, attr := range []string{"EnableDnsSupport", "EnableDnsHostnames"} {
		if _, err := srv.Query(ctx, "ec2", "ModifyVpcAttribute", map[string]string{"VpcId": vpc, attr + ".Value": "true"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.CreateBucket(ctx, "reuse-state"); err != nil {
		t.Fatal(err)
	}
	r := newMotoCLI(t, bin, srv, tf, up.Server.URL)
	r.run("connect", "reuse", "--provider", "aws", "--bucket", "reuse-state", "--region", region)
	rng := "default,size=1,instance-type=t4g.small,zone=us-west-2a"
	timed("setup, reused VPC", func() {
		if res := r.setup("--vpc-cidr", "10.1.0.0/16", "--nodegroup", rng); !res.Applied || res.Plan.Add == 0 {
			t.Fatalf("setup on a reused VPC: applied %v, plan %+v", res.Applied, res.Plan)
		}
	})
	timed("setup again, reused VPC", func() {
		noChange(t, "setup again on a reused VPC", r.setup("--vpc-cidr", "10.1.0.0/16", "--nodegroup", rng))
	})
	kept := func(when string, wantParams int) {
		t.Helper()
		if code, err := srv.S3(ctx, "HEAD", "/reuse-state", nil); err != nil || code != 200 {
			t.Errorf("%s: the bucket made beforehand is gone (HTTP %d, %v)", when, code, err)
		}
		if out, err := srv.Query(ctx, "ec2", "DescribeVpcs", map[string]string{"VpcId.1": vpc}); err != nil || len(mototest.Values(out, "vpcId")) != 1 {
			t.Errorf("%s: the reused VPC %s is gone (%v)", when, vpc, err)
		}
		if p, err := srv.Parameters(ctx, "/reuse/"); err != nil || len(p) != wantParams || !slices.Contains(p, "/reuse/foreign") {
			t.Errorf("%s: parameters of reuse %v (%v), want %d with /reuse/foreign", when, p, err, wantParams)
		}
	}
	// Another machine's context on the same bucket created none of it.
	o := newMotoCLI(t, bin, srv, tf, up.Server.URL)
	o.run("connect", "reuse", "--provider", "aws", "--bucket", "reuse-state", "--region", region)
	caParams, err := srv.Parameters(ctx, "/reuse/")
	if err != nil {
		t.Fatal(err)
	}
	timed("destroy from another context", func() {
		if res := o.destroy(); res.BucketDeleted || !res.BucketKept {
			t.Errorf("destroy from another context: %+v", res)
		}
	})
	kept("after a destroy from another context", len(caParams))
	timed("destroy, reused VPC", func() {
		if res := r.destroy(); res.BucketDeleted || !res.BucketKept {
			t.Errorf("destroy of a bucket made beforehand: %+v", res)
		}
	})
	kept("after destroy", 1)
	gone(t, srv, "reuse")
}
