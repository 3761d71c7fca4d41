// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testNonce is the create nonce of every rendered case.
const testNonce = "5e1f0c2d9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"

// renderCase is one representative flag set, already prepared (zones and
// architectures resolved as the EC2 API would).
type renderCase struct {
	name    string
	cluster Cluster
	inputs  Inputs
}

func baseInputs(nodegroups ...string) Inputs {
	ud := map[string]string{}
	for _, n := range nodegroups {
		ud[n] = "dXNlci1kYXRhIG9mIA==" // base64 "user-data of "
	}
	return Inputs{AccountID: "123456789012", LaunchGeneration: "20261204T100000Z", UserData: ud, CreateNonce: testNonce,
		AMIs:         map[string]string{"arm64": "ami-0arm64debian13", "amd64": "ami-0amd64debian13"},
		JoolArchives: map[string]JoolArchive{"arm64": {Key: "dependencies/jool/jool-4.1.14-6.12.43-cloud-arm64.tar.gz", SHA256: strings.Repeat("a", 64)}}}
}

func ng(name, zone, arch, typ string, size int) NodeGroup {
	return NodeGroup{Name: name, Size: size, DiskSize: 20, InstanceType: typ, Zone: zone, Arch: arch}
}

func renderCases() []renderCase {
	base := Cluster{ID: "demo", Provider: "aws", Region: "us-west-2", Bucket: "demo-state", VPCCIDR: "10.0.0.0/16"}
	noNAT := base
	noNAT.NodeGroups = []NodeGroup{ng("default", "us-west-2a", "arm64", "t4g.small", 1)}

	shared := base
	shared.NAT64 = "t4g.nano"
	shared.NAT64Arch = map[string]string{"t4g.nano": "arm64"}
	shared.NodeGroups = []NodeGroup{ng("default", "us-west-2a", "arm64", "t4g.small", 1), ng("workers", "us-west-2b", "arm64", "c8g.large", 3)}

	dedicated := shared
	dedicated.NAT64Arch = map[string]string{"t4g.nano": "arm64", "t4g.small": "arm64"}
	w := ng("workers", "us-west-2b", "arm64", "c8g.large", 3)
	w.DiskSize, w.NAT64 = 100, "t4g.small"
	dedicated.NodeGroups = []NodeGroup{ng("default", "us-west-2a", "arm64", "t4g.small", 1), w}
	dedicated.WorkloadCAPublish = &S3Object{Bucket: "trust-bucket", Key: "podmin/ca.pem"}
	dedicated.OtelLogs = "endpoint=https://otel.example.com/v1/logs,mtls=true,ca=s3://trust-bucket/otel/ca.pem"

	twoArch := base
	twoArch.NodeGroups = []NodeGroup{ng("arm", "us-west-2a", "arm64", "c8g.large", 2), ng("intel", "us-west-2a", "amd64", "m7i.large", 2)}

	reused := noNAT
	reusedIn := baseInputs("default")
	reusedIn.ExistingVPCID = "vpc-0123456789abcdef0"

	return []renderCase{
		{"no-nat64", noNAT, baseInputs("default")},
		{"shared-nat64", shared, baseInputs("default", "workers")},
		{"dedicated-nat64", dedicated, baseInputs("default", "workers")},
		{"two-architectures", twoArch, baseInputs("arm", "intel")},
		{"reused-vpc", reused, reusedIn},
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			v, err := BuildVars(tc.cluster, tc.inputs)
			if err != nil {
				t.Fatal(err)
			}
			dir := ModuleDir(t.TempDir(), tc.cluster.ID)
			names, err := Write(dir, v)
			if err != nil {
				t.Fatal(err)
			}
			wantNames := []string{"iam.tf", "locals.tf", "nat64-user-data.sh.tftpl", "nat64.tf", "network.tf", "nodes.tf",
				"outputs.tf", VarsFile, "security.tf", "variables.tf", "versions.tf"}
			if !reflect.DeepEqual(names, wantNames) {
				t.Fatalf("wrote %v, want %v", names, wantNames)
			}
			got, err := os.ReadFile(filepath.Join(dir, VarsFile))
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".tfvars.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from %s (run go test -update):\n%s", VarsFile, golden, got)
			}
		})
	}
}

func TestRenderGoldenCasesDiffer(t *testing.T) {
	var shared, dedicated, reused, twoArch Vars
	for _, tc := range renderCases() {
		v, err := BuildVars(tc.cluster, tc.inputs)
		if err != nil {
			t.Fatal(err)
		}
		switch tc.name {
		case "shared-nat64":
			shared = v
		case "dedicated-nat64":
			dedicated = v
		case "reused-vpc":
			reused = v
		case "two-architectures":
			twoArch = v
		}
	}
	if len(shared.NAT64) != 2 || shared.NodeGroups["workers"].NAT64 != "shared-us-west-2b" || shared.NodeGroups["default"].NAT64 != "shared-us-west-2a" {
		t.Errorf("shared NAT64: one instance per zone with a NodeGroup, got %+v", shared.NAT64)
	}
	if d := dedicated.NAT64["ng-workers"]; d.InstanceType != "t4g.small" || dedicated.NodeGroups["workers"].NAT64 != "ng-workers" || len(dedicated.NAT64) != 2 {
		t.Errorf("dedicated NAT64: %+v", dedicated.NAT64)
	}
	if reused.ExistingVPCID != "vpc-0123456789abcdef0" {
		t.Errorf("reused VPC: %+v", reused)
	}
	if len(twoArch.AMIs) != 2 || twoArch.NodeGroups["intel"].Arch != "amd64" {
		t.Errorf("two architectures: %+v", twoArch.AMIs)
	}
}

func TestWriteKeepsProviderFilesAndRemovesStaleOnes(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{".terraform.lock.hcl": "lock", "old.tf": "stale", "other.auto.tfvars.json": "{}", "notes.txt": "mine"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".terraform", "providers"), 0o700); err != nil {
		t.Fatal(err)
	}
	tc := renderCases()[0]
	v, err := BuildVars(tc.cluster, tc.inputs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, v); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{".terraform.lock.hcl", ".terraform/providers", "notes.txt", "versions.tf"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("%s is gone: %v", keep, err)
		}
	}
	for _, gone := range []string{"old.tf", "other.auto.tfvars.json"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("stale %s remains: %v", gone, err)
		}
	}
}

func TestBuildVarsRefusesIncompleteInputs(t *testing.T) {
	tc := renderCases()[1]
	in := tc.inputs
	in.JoolArchives = nil
	if _, err := BuildVars(tc.cluster, in); err == nil || err.Error() != "no Jool archive for NAT64 architecture arm64" {
		t.Errorf("no Jool archive: %v", err)
	}
	in = tc.inputs
	in.AMIs = map[string]string{"amd64": "ami-1"}
	if _, err := BuildVars(tc.cluster, in); err == nil || err.Error() != "no AMI pinned for architecture arm64" {
		t.Errorf("no AMI: %v", err)
	}
	small := tc.cluster
	small.VPCCIDR = "10.0.0.0/28"
	if _, err := BuildVars(small, tc.inputs); err == nil || !strings.Contains(err.Error(), "2 NAT64 instances need 2 IPv4 /28 subnets, but --vpc-cidr 10.0.0.0/28 holds 1") {
		t.Errorf("small VPC: %v", err)
	}
}

// jsonKeys returns the top-level keys v encodes to.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
