// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/infra/ec2test"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/secrets/parameterstore"
	"podmin.dev/podmin/internal/secrets/secretstest"
	"podmin.dev/podmin/internal/state"
)

// fakeTofu is a recording fake OpenTofu/Terraform: it logs each call's
// directory, arguments and environment, and copies every file it is shown
// so a test can search them for secrets.
const fakeTofu = `#!/bin/bash
{
  printf 'cwd=%s\n' "$PWD"
  for a in "$@"; do printf 'arg=%s\n' "$a"; done
  env | LC_ALL=C sort | sed 's/^/env=/'
  echo --
} >> "$FAKE_TF_LOG"
cat ./*.tf ./*.tftpl ./*.json >> "$FAKE_TF_SEEN" 2>/dev/null
case "$1" in
version) echo '{"terraform_version":"1.11.4"}' ;;
init) echo "Initializing the backend..." ;;
plan) echo "Plan: 40 to add, 0 to change, 0 to destroy."; echo plan > podmin.tfplan; exit 2 ;;
show) echo '{"resource_changes":[{"change":{"actions":["create"]}},{"change":{"actions":["create"]}}]}' ;;
output) echo '{"vpc_created":{"value":true},"vpc_id":{"value":"vpc-owned"}}' ;;
apply) echo "Apply complete!" ;;
*) exit 64 ;;
esac
`

type fakeBootstrap struct{}

func (fakeBootstrap) Stage(context.Context, infra.Cluster, map[string]string) error { return nil }

func (fakeBootstrap) Publish(context.Context, infra.Cluster) error { return nil }

func (fakeBootstrap) UserData(_ context.Context, _ infra.Cluster, ng infra.NodeGroup) (string, error) {
	return "dXNlci1kYXRh" + ng.Arch, nil
}

func (fakeBootstrap) JoolArchive(_ context.Context, _ infra.Cluster, arch, _ string) (infra.JoolArchive, error) {
	return infra.JoolArchive{Key: "dependencies/jool/jool-" + arch + ".tar.gz", SHA256: strings.Repeat("b", 64)}, nil
}

type awsEnv struct {
	*builtins.Env
	srv       *objstoretest.S3Server
	ec2       *ec2test.FakeEC2
	ssm       *secretstest.FakeSSM
	log, seen string
	// bootstrap returns the node bootstrap of an operation's Env; nil is
	// fakeBootstrap.
	bootstrap func(h lifecycle.Host) lifecycle.NodeBootstrap
	// keepAtMost is the node bootstrap's StageKeepAtMost.
	keepAtMost int64
}

func newAWSEnv(t *testing.T) *awsEnv {
	t.Helper()
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("bash is not installed")
	}
	srv := useVersityGW(t)
	ae := &awsEnv{Env: testEnv(t), srv: srv, ec2: ec2test.NewIn(srv.Region), ssm: secretstest.NewFakeSSM(t)}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tofu")
	ae.log, ae.seen = filepath.Join(dir, "calls.log"), filepath.Join(dir, "seen")
	if err := os.WriteFile(bin, []byte(fakeTofu), 0o755); err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", "")
	ae.Secrets = func(_ context.Context, _ contexts.Context, provider string) (secrets.Store, error) {
		if provider != secrets.ParameterStore {
			return nil, fmt.Errorf("CA secrets of an AWS cluster opened in %s", provider)
		}
		return parameterstore.New(ssm.New(ssm.Options{Region: "us-west-2", BaseEndpoint: awssdk.String(ae.ssm.URL()), Credentials: creds})), nil
	}
	client := ae.ec2.Client(t)
	ae.Infrastructure = func(_ context.Context, h lifecycle.Host, c contexts.Context) (builtins.ClusterInfra, error) {
		var boot lifecycle.NodeBootstrap = fakeBootstrap{}
		if ae.bootstrap != nil {
			boot = ae.bootstrap(h)
		}
		return &lifecycle.AWSInfra{Host: h, Context: c, EC2: client, Bootstrap: boot,
			Now: func() time.Time { return time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC) },
			Runner: &infra.Runner{CacheDir: ae.Dirs.Cache, Environ: []string{"PATH=" + os.Getenv("PATH"), "FAKE_TF_LOG=" + ae.log, "FAKE_TF_SEEN=" + ae.seen},
				LookupEnv: func(k string) (string, bool) { return bin, k == "PODMIN_TF_CMD" }}}, nil
	}
	if _, err := ae.Connect(t.Context(), builtins.ConnectOptions{Cluster: "demo", Provider: "aws", Bucket: "demo-state"}); err != nil {
		t.Fatal(err)
	}
	return ae
}

// toolCalls returns the first argument of every recorded call.
func (ae *awsEnv) toolCalls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(ae.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var out []string
	for _, block := range strings.Split(string(data), "--\n") {
		for _, line := range strings.Split(block, "\n") {
			if a, ok := strings.CutPrefix(line, "arg="); ok {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

func TestAWSSetupAndDestroy(t *testing.T) {
	ae := newAWSEnv(t)
	// The real node bootstrap; the recorded Jool builds are for amd64, so
	// the NAT64 instances are amd64 too.
	_, boots := ae.realBootstrap(t)
	ctx := t.Context()
	region := ae.CurrentContextOrFail(t).Region

	// An incompatible VPC stops setup before any file or tool run.
	ae.ec2.VPCs = []ec2test.VPC{{ID: "vpc-theirs", CIDR: "10.0.0.0/16", IPv6: "2600:1f14:abc:de00::/56", IPv6Pool: "Amazon", DNSSupport: true}}
	_, err := ae.Setup(ctx, lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"default,zone=a"}})
	if !errors.Is(err, infra.ErrIncompatible) || !strings.Contains(err.Error(), "cannot be reused until you: turn on enableDnsHostnames") {
		t.Fatalf("incompatible VPC: %v", err)
	}
	if calls := ae.toolCalls(t); len(calls) != 0 {
		t.Fatalf("OpenTofu/Terraform ran: %v", calls)
	}
	if _, err := os.Stat(infra.ModuleDir(ae.Dirs.Cache, "demo")); !os.IsNotExist(err) {
		t.Fatalf("the module was written: %v", err)
	}
	ae.ec2.VPCs = nil

	// A refused confirmation applies nothing and stores no secret.
	refused := errors.New("refused")
	_, err = ae.Setup(ctx, lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NAT64: "instance-type=m7i.large", NodeGroup: []string{"default,zone=" + region + "a"},
		Confirm: func(p lifecycle.PlanSummary) error {
			if p.Add != 2 || !strings.Contains(p.Text, "Plan: 40 to add") {
				t.Errorf("plan shown %+v", p)
			}
			return refused
		}})
	if !errors.Is(err, refused) {
		t.Fatalf("refused: %v", err)
	}
	if got := strings.Join(ae.toolCalls(t), " "); got != "version init plan show" {
		t.Fatalf("calls before the confirmation: %s", got)
	}
	if ae.secret(t, "workload-ca-key") != "" {
		t.Fatal("a secret was stored before the confirmation")
	}

	res, err := ae.Setup(ctx, lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NAT64: "instance-type=m7i.large", NodeGroup: []string{"default", "workers,instance-type=m7i.large,zone=b"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := (*boots)[len(*boots)-1].Published(); p == nil || p.Manifest.Dependencies["jool"]["amd64"].Path == "" {
		t.Fatalf("the node dependencies were not published: %+v", p)
	}
	if !res.Applied || res.Cluster.NodeGroups[0].Zone != region+"a" || res.Cluster.NodeGroups[1].Arch != "amd64" {
		t.Fatalf("setup %+v", res)
	}
	if got := strings.Join(ae.toolCalls(t), " "); got != "version init plan show version init plan show apply" {
		t.Fatalf("calls: %s", got)
	}
	// The stored variables are the module's variables file.
	b := rawBucket(t, ae.srv, "demo-state")
	stored, err := b.Get(ctx, state.TFVarsPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	local, err := os.ReadFile(filepath.Join(infra.ModuleDir(ae.Dirs.Cache, "demo"), infra.VarsFile))
	if err != nil || string(local) != string(stored.Data) {
		t.Fatalf("stored variables differ from the module's (%v)", err)
	}
	if !strings.Contains(string(local), `"amd64": "ami-amd-new"`) || !strings.Contains(string(local), `"shared-`+region+`b"`) {
		t.Fatalf("variables:\n%s", local)
	}

	// Each CA parameter carries the context's create nonce as a tag.
	caNonce := ae.CurrentContextOrFail(t).CANonce
	for _, k := range []string{"workload-ca-key", "cluster-ca"} {
		if got := ae.ssm.Tags("/demo/_system/" + k)[secrets.CreateNonceTag]; !contexts.ProvenBy(caNonce, got) {
			t.Fatalf("%s is tagged %q; the context records %q", k, got, caNonce)
		}
	}

	// No secret value in any argument, environment or file the tool saw.
	var values []string
	for _, k := range []string{"workload-ca-key", "cluster-ca"} {
		v := ae.secret(t, k)
		if v == "" {
			t.Fatalf("%s was not stored", k)
		}
		values = append(values, v)
		for _, line := range strings.Split(v, "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				values = append(values, line)
			}
		}
	}
	for _, f := range []string{ae.log, ae.seen} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if strings.Contains(string(data), v) {
				t.Fatalf("a secret value reached OpenTofu/Terraform through %s", filepath.Base(f))
			}
		}
	}

	// The backend's state, as OpenTofu/Terraform would have written it.
	if _, err := b.Put(ctx, state.TFStatePath, []byte(`{"version":4}`)); err != nil {
		t.Fatal(err)
	}
	// Destroy: the state's VPC must carry the cluster's tag.
	ae.ec2.VPCs = []ec2test.VPC{{ID: "vpc-owned", CIDR: "10.0.0.0/16"}}
	_, err = ae.Destroy(ctx, lifecycle.DestroyOptions{})
	if !errors.Is(err, lifecycle.ErrNotOwned) || !strings.Contains(err.Error(), "VPC vpc-owned has no podmin:cluster tag") {
		t.Fatalf("untagged VPC: %v", err)
	}
	if ae.secret(t, "cluster-ca") == "" {
		t.Fatal("a refused destroy deleted a secret")
	}
	// A copied cluster tag is no proof; the create nonce the published
	// variables record is.
	ae.ec2.VPCs[0].Tags = map[string]string{"podmin:cluster": "demo"}
	if _, err = ae.Destroy(ctx, lifecycle.DestroyOptions{}); !errors.Is(err, lifecycle.ErrNotOwned) || !strings.Contains(err.Error(), "VPC vpc-owned does not carry this cluster's podmin:create-nonce") {
		t.Fatalf("VPC with a forged tag: %v", err)
	}
	// Nor is another setup's nonce, however well-formed: only the one this
	// cluster's published variables record.
	ae.ec2.VPCs[0].Tags[infra.NonceTag] = contexts.NewNonce()
	if _, err = ae.Destroy(ctx, lifecycle.DestroyOptions{}); !errors.Is(err, lifecycle.ErrNotOwned) || !strings.Contains(err.Error(), "VPC vpc-owned does not carry this cluster's podmin:create-nonce") {
		t.Fatalf("VPC with another setup's nonce: %v", err)
	}
	if ae.secret(t, "cluster-ca") == "" {
		t.Fatal("a refused destroy deleted a secret")
	}
	ae.ec2.VPCs[0].Tags[infra.NonceTag] = publishedNonce(t, b)
	dres, err := ae.Destroy(ctx, lifecycle.DestroyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !dres.BucketDeleted || !dres.ContextRemoved || ae.secret(t, "cluster-ca") != "" || ae.secret(t, "workload-ca-key") != "" {
		t.Fatalf("destroy %+v", dres)
	}
	calls := ae.toolCalls(t)
	if got := strings.Join(calls[len(calls)-6:], " "); got != "version init plan show output apply" {
		t.Fatalf("destroy calls: %s", got)
	}
}

// CurrentContextOrFail returns the current context.
func (ae *awsEnv) CurrentContextOrFail(t *testing.T) contexts.Context {
	t.Helper()
	c, err := ae.CurrentContext()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// secret reads a CA secret of cluster demo from the fake Parameter Store;
// "" when absent.
func (ae *awsEnv) secret(t *testing.T, key string) string {
	t.Helper()
	n, err := secrets.InternalSecret("demo", key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ae.Secrets(t.Context(), contexts.Context{}, secrets.ParameterStore)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Read(t.Context(), n)
	if errors.Is(err, secrets.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

func TestAWSTeardownNeedsProofOfTheState(t *testing.T) {
	ae := newAWSEnv(t)
	ctx := t.Context()
	b := rawBucket(t, ae.srv, "demo-state")

	// No state and no variables: nothing to destroy, nothing run.
	res, err := ae.Teardown(ctx, lifecycle.TeardownOptions{})
	if err != nil || len(ae.toolCalls(t)) != 0 || !strings.Contains(strings.Join(res.Plan.Steps, ""), "no OpenTofu/Terraform state") {
		t.Fatalf("teardown without state: %+v %v %v", res, err, ae.toolCalls(t))
	}
	// A state without the variables that name its cluster.
	if _, err := b.Put(ctx, state.TFStatePath, []byte(`{"version":4}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ae.Teardown(ctx, lifecycle.TeardownOptions{}); !errors.Is(err, lifecycle.ErrNotOwned) ||
		!strings.HasPrefix(err.Error(), "no proof of ownership: tfstate/podmin.tfstate exists but tfstate/podmin.auto.tfvars.json does not, so Podmin cannot show what the state belongs to: nothing was changed; put back the variables") {
		t.Fatalf("state without variables: %v", err)
	}
	// Variables of another cluster.
	if _, err := b.Put(ctx, state.TFVarsPath, []byte(`{"cluster":"prod","vpc_cidr":"10.0.0.0/16"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ae.Teardown(ctx, lifecycle.TeardownOptions{}); !errors.Is(err, lifecycle.ErrNotOwned) ||
		err.Error() != `no proof of ownership: tfstate/podmin.auto.tfvars.json names cluster "prod", not "demo": nothing was changed` {
		t.Fatalf("another cluster's variables: %v", err)
	}
	if calls := ae.toolCalls(t); len(calls) != 0 {
		t.Fatalf("OpenTofu/Terraform ran without proof: %v", calls)
	}

	// Setup never takes over another cluster's state either.
	if _, err := ae.Setup(ctx, lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"default"}}); !errors.Is(err, lifecycle.ErrNotOwned) {
		t.Fatalf("setup over another cluster's variables: %v", err)
	}
	for _, k := range []string{state.TFVarsPath, state.TFStatePath} {
		if err := b.Delete(ctx, k, ""); err != nil {
			t.Fatal(err)
		}
	}

	// With proof, teardown plans the destroy, checks the VPC's tags and
	// applies; secrets, bucket and context stay.
	if _, err := ae.Setup(ctx, lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, state.TFStatePath, []byte(`{"version":4}`)); err != nil {
		t.Fatal(err)
	}
	ae.ec2.VPCs = []ec2test.VPC{{ID: "vpc-owned", CIDR: "10.0.0.0/16", Tags: map[string]string{"podmin:cluster": "demo", infra.NonceTag: publishedNonce(t, b)}}}
	before := len(ae.toolCalls(t))
	var shown lifecycle.PlanSummary
	if _, err := ae.Teardown(ctx, lifecycle.TeardownOptions{Confirm: func(p lifecycle.PlanSummary) error { shown = p; return nil }}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ae.toolCalls(t)[before:], " "); got != "version init plan show output apply" || shown.Add != 2 {
		t.Fatalf("teardown calls %s, plan %+v", got, shown)
	}
	data, _ := os.ReadFile(ae.log)
	if !strings.Contains(string(data), "arg=-destroy") {
		t.Fatal("teardown did not plan a destroy")
	}
	if ae.secret(t, "cluster-ca") == "" {
		t.Fatal("teardown deleted a CA secret")
	}
	if _, err := ae.CurrentContext(); err != nil {
		t.Fatal(err)
	}
	if exists, err := b.BucketExists(ctx); !exists || err != nil {
		t.Fatalf("teardown removed the bucket: %v", err)
	}
}

// publishedNonce is the create nonce of the variables setup published.
func publishedNonce(t *testing.T, b objstore.Store) string {
	t.Helper()
	v := publishedVars(t, b)
	if len(v.CreateNonce) != 64 {
		t.Fatalf("the published variables record no create nonce: %q", v.CreateNonce)
	}
	return v.CreateNonce
}

// A later setup keeps what the first one published: the create nonce its
// resources carry and every existing NodeGroup's subnet, whatever names
// are added.
func TestAWSSetupKeepsNonceAndSubnets(t *testing.T) {
	ae := newAWSEnv(t)
	ctx := t.Context()
	b := rawBucket(t, ae.srv, "demo-state")
	if _, err := ae.Setup(ctx, lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"workers", "default"}}); err != nil {
		t.Fatal(err)
	}
	first := publishedVars(t, b)
	// a152 hashes to workers' netnum.
	if _, err := ae.Setup(ctx, lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NodeGroup: []string{"a152", "default", "workers"}}); err != nil {
		t.Fatal(err)
	}
	second := publishedVars(t, b)
	if second.CreateNonce != first.CreateNonce || len(first.CreateNonce) != 64 {
		t.Fatalf("the create nonce changed from %q to %q", first.CreateNonce, second.CreateNonce)
	}
	for n, ng := range first.NodeGroups {
		if second.NodeGroups[n].SubnetIndex != ng.SubnetIndex {
			t.Errorf("NodeGroup %s moved from netnum %d to %d", n, ng.SubnetIndex, second.NodeGroups[n].SubnetIndex)
		}
	}
	if a := second.NodeGroups["a152"].SubnetIndex; a == first.NodeGroups["workers"].SubnetIndex || a == first.NodeGroups["default"].SubnetIndex {
		t.Errorf("a152 got a taken netnum %d", a)
	}
}

// publishedVars reads the variables setup published.
func publishedVars(t *testing.T, b objstore.Store) infra.Vars {
	t.Helper()
	obj, err := b.Get(t.Context(), state.TFVarsPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vars infra.Vars
	if err := json.Unmarshal(obj.Data, &vars); err != nil {
		t.Fatal(err)
	}
	return vars
}
