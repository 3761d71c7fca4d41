// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetupTeardownDestroyOnLocal(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	bucket := filepath.Join(c.root, "data", "podmin", "buckets", "demo-bucket")

	// Bad values and a missing confirmation change nothing.
	before := c.snapshot()
	c.fails(2, `invalid setup: --nodegroup "web,disk-size=4": disk-size "4" is not valid`, "setup", "--nodegroup", "web,disk-size=4", "-y")
	c.fails(2, `invalid setup: --nodegroup "web,disk-size=100": disk-size does not apply to the local provider`, "setup", "--nodegroup", "web,disk-size=100", "-y")
	c.fails(2, `invalid setup: --vpc-cidr "10.0.0.0/16": the local provider has no VPC`, "setup", "--vpc-cidr", "10.0.0.0/16", "--nodegroup", "web", "-y")
	c.fails(2, "unknown flag: --node-group", "setup", "--node-group", "web")
	c.fails(4, "standard input is not a terminal to confirm it: pass --yes (-y) to podmin setup", "setup", "--nodegroup", "web")
	c.unchanged(before)

	out := c.ok("setup", "--nodegroup", "web,size=2", "-y")
	for _, w := range []string{"secret /demo/_system/workload-ca-key: created", "secret /demo/_system/cluster-ca: created",
		"cluster configuration tfstate/podmin.auto.tfvars.json: published",
		"podmin-agent --provider local --bucket " + bucket + " --region local --cluster demo --nodegroup web --ipv6-prefix 2001:db8:0:1:2::/80"} {
		if !strings.Contains(out, w) {
			t.Errorf("setup output lacks %q:\n%s", w, out)
		}
	}
	var res struct {
		Secrets []struct{ Action string }
		Cluster struct{ NodeGroups []struct{ Name string } }
	}
	if err := json.Unmarshal([]byte(c.ok("setup", "--nodegroup", "web,size=2", "-y", "-o", "json")), &res); err != nil ||
		res.Secrets[0].Action != "kept" || res.Cluster.NodeGroups[0].Name != "web" {
		t.Fatalf("setup -o json: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(bucket, "tfstate", "podmin.auto.tfvars.json")); err != nil {
		t.Fatal(err)
	}

	c.fails(4, "pass --yes (-y) to podmin teardown", "teardown")
	c.ok("teardown", "-y")
	if _, err := os.Stat(filepath.Join(bucket, "tfstate", "podmin.auto.tfvars.json")); !os.IsNotExist(err) {
		t.Fatalf("teardown kept the configuration: %v", err)
	}
	c.ok("setup", "--nodegroup", "web", "-y")

	// The bucket tagged for another cluster is never deleted, nor one whose
	// tags lost the nonce connect recorded.
	tags := filepath.Join(bucket, ".podmin", "tags.json")
	own, err := os.ReadFile(tags)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tags, []byte(`{"podmin:cluster":"prod"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.fails(4, `bucket "demo-bucket" is tagged podmin:cluster=prod, another cluster's, so this cluster will not delete it; nothing was deleted`, "destroy", "-y")
	if err := os.WriteFile(tags, []byte(`{"podmin:cluster":"demo"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.fails(4, `bucket "demo-bucket" does not carry the podmin:create-nonce this context recorded when connect created it`, "destroy", "-y")
	if err := os.WriteFile(tags, own, 0o600); err != nil {
		t.Fatal(err)
	}
	out = c.ok("destroy", "-y")
	if !strings.Contains(out, "cluster demo is destroyed") {
		t.Fatalf("destroy: %s", out)
	}
	if _, err := os.Stat(bucket); !os.IsNotExist(err) {
		t.Fatalf("bucket remains: %v", err)
	}
	c.fails(1, "needs a current context", "destroy", "-y")
}
