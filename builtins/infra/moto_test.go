// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/builtins/infra/tftest"
	"podmin.dev/podmin/internal/cloud/aws/mototest"
)

// MotoVariantsEnv selects the fixture variants TestModuleAgainstMoto
// applies: a comma-separated list of testdata names, or "all".
const MotoVariantsEnv = "PODMIN_MOTO_VARIANTS"

// defaultMotoVariants are applied unless MotoVariantsEnv says otherwise:
// together they create every resource type of the module (the NAT64
// instances, their ENIs, EIPs and routes, in the dedicated variant) and
// read a reused VPC, within the tier's time on a two-core machine. A new
// VPC without NAT64 is what the lifecycle test's setup applies; the
// shared-NAT64 and two-architecture variants add no resource type.
var defaultMotoVariants = []string{"dedicated-nat64", "reused-vpc"}

// TestModuleAgainstMoto applies each chosen fixture variant of the module
// for real against moto (launcher.py), with a local state: the apply must
// succeed, a re-plan right after it must be empty, and destroy must leave
// nothing of the cluster's, and keep a reused VPC. Each variant gets its
// own moto server, so they run in parallel.
func TestModuleAgainstMoto(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the moto tier applies the module for real")
	}
	if why := mototest.Available(); why != "" {
		t.Skip(why)
	}
	tf := tftest.Find(t)
	variants := defaultMotoVariants
	if v := os.Getenv(MotoVariantsEnv); v == "all" {
		variants = nil
		fixtures, _ := filepath.Glob(filepath.Join("testdata", "*.tfvars.json"))
		for _, f := range fixtures {
			variants = append(variants, strings.TrimSuffix(filepath.Base(f), ".tfvars.json"))
		}
	} else if v != "" {
		variants = strings.Split(v, ",")
	}
	for _, name := range variants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			applyAgainstMoto(t, tf, name)
		})
	}
}

func applyAgainstMoto(t *testing.T, tf tftest.Terraform, name string) {
	ctx := context.Background()
	srv := mototest.Start(t)
	v := readFixture(t, filepath.Join("testdata", name+".tfvars.json"))
	v.AccountID = mototest.Account
	for arch := range v.AMIs {
		v.AMIs[arch] = mototest.AMIs[arch]
	}
	if v.ExistingVPCID != "" {
		// The VPC a user made beforehand: IPv6 /56, DNS on.
		out, err := srv.Query(ctx, "ec2", "CreateVpc", map[string]string{"CidrBlock": v.VPCCIDR, "AmazonProvidedIpv6CidrBlock": "true"})
		if err != nil {
			t.Fatal(err)
		}
		v.ExistingVPCID = mototest.Values(out, "vpcId")[0]
		for _, attr := range []string{"EnableDnsSupport", "EnableDnsHostnames"} {
			if _, err := srv.Query(ctx, "ec2", "ModifyVpcAttribute", map[string]string{"VpcId": v.ExistingVPCID, attr + ".Value": "true"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	if _, err := Write(dir, v); err != nil {
		t.Fatal(err)
	}
	// The state stays in the module directory: the S3 backend is the
	// lifecycle test's to prove.
	if err := os.WriteFile(filepath.Join(dir, "backend_override.tf"), []byte("terraform {\n  backend \"local\" {}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(tf.Env(), srv.Env()...)
	run := func(args ...string) (string, time.Duration, error) {
		start := time.Now()
		cmd := exec.Command(tf.Bin, append(args, "-no-color", "-input=false")...)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), time.Since(start), err
	}
	mustRun := func(args ...string) time.Duration {
		out, d, err := run(args...)
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
		}
		return d
	}
	mustRun("init")
	apply := mustRun("apply", "-auto-approve")
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_, _, _ = run("destroy", "-auto-approve")
		}
	})
	resources := countState(t, tf, dir, env)
	// The check that destroy left nothing must see what apply made.
	if seen, err := srv.Leftovers(ctx, v.Cluster); err != nil || len(seen) < 5 {
		t.Fatalf("after apply the leftover check sees only %v (%v)", seen, err)
	}
	// Right after an apply, the cloud must read back as applied: a change
	// here would make every later setup apply again.
	out, replan, err := run("plan", "-detailed-exitcode")
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() == 2:
		t.Errorf("the re-plan after apply is not empty:\n%s", planChanges(out))
	default:
		t.Fatalf("terraform plan: %v\n%s", err, out)
	}
	destroy := mustRun("destroy", "-auto-approve")
	destroyed = true
	left, err := srv.Leftovers(ctx, v.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("destroy left %d resources of the cluster: %s", len(left), strings.Join(left, ", "))
	}
	if v.ExistingVPCID != "" {
		out, err := srv.Query(ctx, "ec2", "DescribeVpcs", map[string]string{"VpcId.1": v.ExistingVPCID})
		if err != nil || len(mototest.Values(out, "vpcId")) != 1 {
			t.Errorf("destroy removed the reused VPC %s (%v)", v.ExistingVPCID, err)
		}
	}
	t.Logf("moto %s: %d resources, apply %.1f s, re-plan %.1f s, destroy %.1f s", name, resources, apply.Seconds(), replan.Seconds(), destroy.Seconds())
}

// countState is the number of resources (data sources aside) in dir's
// state.
func countState(t *testing.T, tf tftest.Terraform, dir string, env []string) int {
	t.Helper()
	cmd := exec.Command(tf.Bin, "show", "-json")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("terraform show: %v", err)
	}
	var st struct {
		Values struct {
			Root struct {
				Resources []struct {
					Mode string `json:"mode"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("terraform show: %v", err)
	}
	n := 0
	for _, r := range st.Values.Root.Resources {
		if r.Mode == "managed" {
			n++
		}
	}
	return n
}

// planChanges keeps the lines of a plan that name a change.
func planChanges(plan string) string {
	var b strings.Builder
	for _, l := range strings.Split(plan, "\n") {
		if s := strings.TrimSpace(l); strings.HasPrefix(s, "#") || strings.HasPrefix(s, "~") || strings.HasPrefix(s, "+") ||
			strings.HasPrefix(s, "-") || strings.HasPrefix(s, "Plan:") {
			fmt.Fprintln(&b, l)
		}
	}
	return b.String()
}
