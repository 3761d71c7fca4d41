// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/internal/contexts"
)

var (
	awsCtx   = contexts.Context{Cluster: "demo", Provider: "aws", Region: "us-west-2", Bucket: "demo-state"}
	localCtx = contexts.Context{Cluster: "demo", Provider: "local", Region: "local", Bucket: "demo"}
)

func TestParseSetupValid(t *testing.T) {
	cl, err := parseSetup(SetupOptions{
		VPCCIDR: "10.0.0.0/16", NAT64: "true",
		NodeGroup:         []string{"default", "workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small"},
		WorkloadCAPublish: "s3://trust-bucket/podmin/ca.pem",
		OtelLogs:          "endpoint=https://otel.example.com/v1/logs,mtls=true,ca=s3://trust-bucket/otel-ca.pem,headers-secret=true",
	}, awsCtx)
	if err != nil {
		t.Fatal(err)
	}
	want := infra.Cluster{ID: "demo", Provider: "aws", Region: "us-west-2", Bucket: "demo-state",
		VPCCIDR: "10.0.0.0/16", NAT64: "t4g.nano",
		NodeGroups: []infra.NodeGroup{
			{Name: "default", Size: 1, DiskSize: 20, InstanceType: "t4g.small"},
			{Name: "workers", Size: 3, DiskSize: 100, InstanceType: "c8g.large", Zone: "us-west-2b", NAT64: "t4g.small"},
		},
		WorkloadCAPublish: &infra.S3Object{Bucket: "trust-bucket", Key: "podmin/ca.pem"},
		OtelLogs:          "endpoint=https://otel.example.com/v1/logs,mtls=true,ca=s3://trust-bucket/otel-ca.pem,headers-secret=true",
	}
	if !reflect.DeepEqual(cl, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", cl, want)
	}
	cl, err = parseSetup(SetupOptions{VPCCIDR: "192.168.4.0/24", NAT64: "instance-type=c7gn.medium",
		NodeGroup: []string{"a,zone=us-west-2c,disk-size=8", "b,disk-size=16384,size=0"}}, awsCtx)
	if err != nil {
		t.Fatal(err)
	}
	if cl.NAT64 != "c7gn.medium" || cl.NodeGroups[0].Zone != "us-west-2c" || cl.NodeGroups[1].DiskSize != 16384 || cl.NodeGroups[1].Size != 0 {
		t.Fatalf("parsed %+v", cl)
	}
}

func TestParseSetupRefusesEachRule(t *testing.T) {
	ng := []string{"default"}
	cases := []struct {
		name string
		opts SetupOptions
		c    contexts.Context
		want string
	}{
		{"no cidr", SetupOptions{NodeGroup: ng}, awsCtx,
			"--vpc-cidr is required: " + cidrRule},
		{"not a cidr", SetupOptions{VPCCIDR: "10.0.0.0", NodeGroup: ng}, awsCtx,
			`--vpc-cidr "10.0.0.0" is not an IPv4 CIDR: ` + cidrRule},
		{"ipv6 cidr", SetupOptions{VPCCIDR: "fd00::/56", NodeGroup: ng}, awsCtx,
			`--vpc-cidr "fd00::/56" is not an IPv4 CIDR: ` + cidrRule},
		{"public cidr", SetupOptions{VPCCIDR: "8.8.0.0/16", NodeGroup: ng}, awsCtx,
			`--vpc-cidr "8.8.0.0/16" is not a private IPv4 network: ` + cidrRule},
		{"straddles private range", SetupOptions{VPCCIDR: "172.0.0.0/16", NodeGroup: ng}, awsCtx,
			`--vpc-cidr "172.0.0.0/16" is not a private IPv4 network: ` + cidrRule},
		{"host bits", SetupOptions{VPCCIDR: "10.0.0.1/16", NodeGroup: ng}, awsCtx,
			`--vpc-cidr "10.0.0.1/16" has host bits set (the network is 10.0.0.0/16): ` + cidrRule},
		{"too large", SetupOptions{VPCCIDR: "10.0.0.0/8", NodeGroup: ng}, awsCtx,
			`--vpc-cidr "10.0.0.0/8" is a /8: ` + cidrRule},
		{"too small", SetupOptions{VPCCIDR: "10.0.0.0/29", NodeGroup: ng}, awsCtx,
			`--vpc-cidr "10.0.0.0/29" is a /29: ` + cidrRule},
		{"nat64 form", SetupOptions{VPCCIDR: "10.0.0.0/16", NAT64: "t4g.nano", NodeGroup: ng}, awsCtx,
			`--nat64 "t4g.nano": ` + nat64Rule},
		{"nat64 type", SetupOptions{VPCCIDR: "10.0.0.0/16", NAT64: "instance-type=big", NodeGroup: ng}, awsCtx,
			`--nat64 "instance-type=big": instance type "big" is not valid: ` + typeRule},
		{"no nodegroup", SetupOptions{VPCCIDR: "10.0.0.0/16"}, awsCtx,
			"no --nodegroup given: the NodeGroup list is authoritative, so name every NodeGroup the cluster keeps, e.g. --nodegroup default"},
		{"bad name", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"Web"}}, awsCtx,
			`--nodegroup "Web": invalid NodeGroup ID "Web": it must start with a lowercase letter: use 1 to 32 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen`},
		{"duplicate group", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web", "web,size=2"}}, awsCtx,
			`--nodegroup "web,size=2": NodeGroup "web" is given twice: name each NodeGroup once`},
		{"not kv", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,size"}}, awsCtx,
			`--nodegroup "web,size": "size" is not KEY=VALUE: use NAME[,size=N,disk-size=GIB,instance-type=TYPE,zone=ZONE,nat64=TYPE]`},
		{"duplicate key", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,size=1,size=2"}}, awsCtx,
			`--nodegroup "web,size=1,size=2": size is given twice: give each setting once`},
		{"unknown key", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,disk=20"}}, awsCtx,
			`--nodegroup "web,disk=20": unknown setting "disk": use size, disk-size, instance-type, zone or nat64`},
		{"size", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,size=-1"}}, awsCtx,
			`--nodegroup "web,size=-1": size "-1" is not valid: ` + sizeRule},
		{"disk small", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,disk-size=7"}}, awsCtx,
			`--nodegroup "web,disk-size=7": disk-size "7" is not valid: ` + diskRule},
		{"disk large", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,disk-size=16385"}}, awsCtx,
			`--nodegroup "web,disk-size=16385": disk-size "16385" is not valid: ` + diskRule},
		{"disk not int", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,disk-size=20G"}}, awsCtx,
			`--nodegroup "web,disk-size=20G": disk-size "20G" is not valid: ` + diskRule},
		{"instance type", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,instance-type=C8G.large"}}, awsCtx,
			`--nodegroup "web,instance-type=C8G.large": instance-type "C8G.large" is not valid: ` + typeRule},
		{"zone suffix", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,zone=B"}}, awsCtx,
			`--nodegroup "web,zone=B": zone "B" is not valid: ` + zoneRule},
		{"zone other region", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,zone=eu-west-1a"}}, awsCtx,
			`--nodegroup "web,zone=eu-west-1a": zone "eu-west-1a" is not in the cluster's region us-west-2: ` + zoneRule},
		{"dedicated nat64", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"web,nat64=true"}}, awsCtx,
			`--nodegroup "web,nat64=true": nat64 "true" is not valid: ` + typeRule + " for a dedicated NAT64 instance"},
		{"publish scheme", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, WorkloadCAPublish: "https://b/k"}, awsCtx,
			`--workload-ca-publish "https://b/k": not an s3:// URL: use s3://BUCKET/KEY`},
		{"publish key", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, WorkloadCAPublish: "s3://trust-bucket/dir/"}, awsCtx,
			`--workload-ca-publish "s3://trust-bucket/dir/": names no object: use s3://BUCKET/KEY with an exact key that does not end in /`},
		{"otel endpoint", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, OtelLogs: "endpoint=http://x/v1/logs"}, awsCtx,
			`--otel-logs "endpoint=http://x/v1/logs": endpoint "http://x/v1/logs" must be https: TLS certificate and hostname verification are mandatory`},
		{"otel protocol", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, OtelLogs: "endpoint=https://x/v1/logs,protocol=udp"}, awsCtx,
			`--otel-logs "endpoint=https://x/v1/logs,protocol=udp": protocol=udp: use http (OTLP/HTTP protobuf, the default) or grpc`},
		{"otel bool", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, OtelLogs: "endpoint=https://x/v1/logs,mtls=yes"}, awsCtx,
			`--otel-logs "endpoint=https://x/v1/logs,mtls=yes": mtls=yes: use mtls=true or mtls=false`},
		{"otel no endpoint", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, OtelLogs: "protocol=grpc"}, awsCtx,
			`--otel-logs "protocol=grpc": needs endpoint=URL, e.g. endpoint=https://otlp.example.com/v1/logs`},
		{"otel unknown", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, OtelLogs: "endpoint=https://x/v1/logs,tls=off"}, awsCtx,
			`--otel-logs "endpoint=https://x/v1/logs,tls=off": unknown key "tls": use endpoint, protocol, mtls, ca or headers-secret`},
		{"otel path", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, OtelLogs: "endpoint=https://x"}, awsCtx,
			`--otel-logs "endpoint=https://x": endpoint "https://x" names no path: OTLP/HTTP uses the exact signal URL, e.g. https://x/v1/logs`},
		{"agent source", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng, AgentSource: "/nonexistent/podmin"}, awsCtx,
			`--agent-source "/nonexistent/podmin" is not a directory: pass the root of a Podmin source checkout (its go.mod declares module podmin.dev/podmin)`},
		{"local vpc", SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: ng}, localCtx,
			`--vpc-cidr "10.0.0.0/16": the local provider has no VPC: omit --vpc-cidr on a local context`},
		{"local nat64", SetupOptions{NAT64: "true", NodeGroup: ng}, localCtx,
			`--nat64 "true": the local provider has no NAT64 instances: omit --nat64 on a local context`},
		{"local instance type", SetupOptions{NodeGroup: []string{"web,instance-type=t4g.small"}}, localCtx,
			`--nodegroup "web,instance-type=t4g.small": instance-type does not apply to the local provider, which runs node agents on this machine: only size= is accepted`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSetup(tc.opts, tc.c)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalidSetup) {
				t.Errorf("%v does not match ErrInvalidSetup", err)
			}
			if got := err.Error(); got != "invalid setup: "+tc.want {
				t.Errorf("error\n got %s\nwant invalid setup: %s", got, tc.want)
			}
		})
	}
}

func TestAgentSourceMustBeAPodminCheckout(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/other\n")
	if err := checkAgentSource(dir); err == nil || err.Error() != `invalid setup: --agent-source "`+dir+`" is module example.com/other: pass the root of a Podmin source checkout (its go.mod declares module podmin.dev/podmin)` {
		t.Fatalf("other module: %v", err)
	}
	write("go.mod", "module podmin.dev/podmin\n\ngo 1.26\n")
	if err := checkAgentSource(dir); err == nil {
		t.Fatal("accepted a checkout without cmd/podmin-agent")
	}
	write("cmd/podmin-agent/main.go", "package main\n")
	// A checkout where clang never ran would build an agent without its
	// eBPF dataplane.
	if err := checkAgentSource(dir); err == nil || !strings.Contains(err.Error(), "the agent would have no eBPF dataplane: "+dir+` has no bpf/obj/vip_bpfel.o: run "make bpf" there`) {
		t.Fatalf("a checkout without the eBPF object: %v", err)
	}
	write("bpf/obj/vip_bpfel.o", "\x7fELF")
	if err := checkAgentSource(dir); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseSetupNodeGroup checks that any --nodegroup value is either
// refused with ErrInvalidSetup or yields a NodeGroup within every rule.
func FuzzParseSetupNodeGroup(f *testing.F) {
	for _, s := range []string{"default", "workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small",
		"a,zone=us-west-2c", "x,,", "web,size=1,size=2", "Web", "a,disk-size=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		cl, err := parseSetup(SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{raw}}, awsCtx)
		if err != nil {
			if !errors.Is(err, ErrInvalidSetup) {
				t.Fatalf("%q: error %v is not ErrInvalidSetup", raw, err)
			}
			return
		}
		ng := cl.NodeGroups[0]
		if ng.DiskSize < infra.MinDiskSize || ng.DiskSize > infra.MaxDiskSize || ng.Size < 0 || ng.Size > infra.MaxSize ||
			!instanceTypeRE.MatchString(ng.InstanceType) || (ng.Zone != "" && !fullZoneRE.MatchString(ng.Zone)) {
			t.Fatalf("%q accepted as %+v", raw, ng)
		}
	})
}
