// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// untaggable are the resource types of the module that AWS cannot tag.
var untaggable = map[string]bool{
	"aws_route":                      true,
	"aws_route_table_association":    true,
	"aws_iam_role_policy":            true,
	"aws_iam_role_policy_attachment": true,
}

// module parses every embedded .tf file.
func module(t *testing.T) map[string]*hclsyntax.Body {
	t.Helper()
	p := hclparse.NewParser()
	out := map[string]*hclsyntax.Body{}
	err := fs.WalkDir(awsModule, "aws", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".tf") {
			return err
		}
		src, err := awsModule.ReadFile(name)
		if err != nil {
			return err
		}
		f, diags := p.ParseHCL(src, path.Base(name))
		if diags.HasErrors() {
			t.Fatalf("parse %s: %s", name, diags.Error())
		}
		out[path.Base(name)] = f.Body.(*hclsyntax.Body)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// walkBlocks calls fn for every block below body, nested ones included.
func walkBlocks(body *hclsyntax.Body, fn func(*hclsyntax.Block)) {
	for _, b := range body.Blocks {
		fn(b)
		walkBlocks(b.Body, fn)
	}
}

// references returns the names below root ("var", "local") that the
// attributes of body and its nested blocks refer to.
func references(body *hclsyntax.Body, root string) map[string]bool {
	out := map[string]bool{}
	var visit func(b *hclsyntax.Body)
	visit = func(b *hclsyntax.Body) {
		for _, a := range b.Attributes {
			for _, tr := range a.Expr.Variables() {
				if tr.RootName() != root || len(tr) < 2 {
					continue
				}
				if step, ok := tr[1].(hcl.TraverseAttr); ok {
					out[step.Name] = true
				}
			}
		}
		for _, nb := range b.Blocks {
			visit(nb.Body)
		}
	}
	visit(body)
	return out
}

func TestModuleVariablesAreDeclaredAndUsed(t *testing.T) {
	files := module(t)
	declared := map[string]bool{}
	used := map[string]bool{}
	for _, body := range files {
		for _, b := range body.Blocks {
			if b.Type == "variable" {
				declared[b.Labels[0]] = true
				continue
			}
			for n := range references(b.Body, "var") {
				used[n] = true
			}
		}
	}
	for n := range used {
		if !declared[n] {
			t.Errorf("var.%s is used but not declared", n)
		}
	}
	for n := range declared {
		if !used[n] {
			t.Errorf("variable %q is declared but never used", n)
		}
		for _, bad := range []string{"secret", "password", "token", "private"} {
			if strings.Contains(n, bad) {
				t.Errorf("variable %q looks like it carries a secret: no secret may enter OpenTofu/Terraform", n)
			}
		}
	}
	// Every variable in podmin.auto.tfvars.json is declared, and every
	// declared variable without a default is written.
	v, err := BuildVars(renderCases()[2].cluster, renderCases()[2].inputs)
	if err != nil {
		t.Fatal(err)
	}
	written := jsonKeys(t, v)
	for _, n := range written {
		if !declared[n] {
			t.Errorf("%s sets %q, which the module does not declare", VarsFile, n)
		}
	}
	if len(written) != len(declared)-1 { // agent_leader_port keeps its default
		t.Errorf("%s sets %d variables %v; the module declares %d", VarsFile, len(written), written, len(declared))
	}
}

func TestModuleTagsEveryTaggableResource(t *testing.T) {
	files := module(t)
	var resources []string
	for file, body := range files {
		for _, b := range body.Blocks {
			if b.Type != "resource" {
				continue
			}
			typ, name := b.Labels[0], b.Labels[1]
			id := file + ": " + typ + "." + name
			resources = append(resources, id)
			if untaggable[typ] {
				continue
			}
			switch typ {
			case "aws_autoscaling_group":
				checkASGTags(t, id, b.Body)
			default:
				tags, ok := b.Body.Attributes["tags"]
				if !ok {
					t.Errorf("%s has no tags", id)
					continue
				}
				if !references(&hclsyntax.Body{Attributes: hclsyntax.Attributes{"tags": tags}}, "local")["tags"] {
					t.Errorf("%s is not tagged with local.tags (podmin:cluster)", id)
				}
			}
			if typ == "aws_launch_template" {
				checkLaunchTemplateTags(t, id, b.Body)
			}
		}
	}
	sort.Strings(resources)
	if len(resources) < 30 {
		t.Fatalf("only %d resources found: %v", len(resources), resources)
	}
	// local.tags carries the cluster tag and the create nonce.
	want := map[string]string{ClusterTag: "cluster", NonceTag: "create_nonce"}
	got := map[string]string{}
	for _, body := range files {
		walkBlocks(body, func(b *hclsyntax.Block) {
			if b.Type != "locals" {
				return
			}
			if a, ok := b.Body.Attributes["tags"]; ok {
				obj, _ := a.Expr.(*hclsyntax.ObjectConsExpr)
				for _, item := range obj.Items {
					k, _ := item.KeyExpr.Value(nil)
					for n := range references(&hclsyntax.Body{Attributes: hclsyntax.Attributes{"v": {Name: "v", Expr: item.ValueExpr}}}, "var") {
						got[k.AsString()] = n
					}
				}
			}
		})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("local.tags maps %v, want %v", got, want)
	}
}

func checkASGTags(t *testing.T, id string, body *hclsyntax.Body) {
	keys := map[string]bool{}
	for _, b := range body.Blocks {
		if b.Type != "tag" {
			continue
		}
		if k, ok := b.Body.Attributes["key"]; ok {
			v, diags := k.Expr.Value(nil)
			if !diags.HasErrors() {
				keys[v.AsString()] = true
			}
		}
	}
	if !keys["podmin:cluster"] || !keys["podmin:nodegroup"] {
		t.Errorf("%s lacks the podmin:cluster and podmin:nodegroup tags: %v", id, keys)
	}
}

// checkLaunchTemplateTags requires instances, ENIs and volumes to carry
// podmin:cluster and podmin:nodegroup.
func checkLaunchTemplateTags(t *testing.T, id string, body *hclsyntax.Body) {
	kinds := map[string]bool{}
	for _, b := range body.Blocks {
		if b.Type != "tag_specifications" {
			continue
		}
		rt, _ := b.Body.Attributes["resource_type"].Expr.Value(nil)
		tags, ok := b.Body.Attributes["tags"]
		if !ok {
			t.Errorf("%s: tag_specifications %s has no tags", id, rt.AsString())
			continue
		}
		src := tagSource(tags)
		if !strings.Contains(src, "local.tags") || !strings.Contains(src, `"podmin:nodegroup"`) {
			t.Errorf("%s: %s tags %s lack podmin:cluster or podmin:nodegroup", id, rt.AsString(), src)
		}
		kinds[rt.AsString()] = true
	}
	for _, k := range []string{"instance", "network-interface", "volume"} {
		if !kinds[k] {
			t.Errorf("%s does not tag %s", id, k)
		}
	}
}

func tagSource(a *hclsyntax.Attribute) string {
	var b strings.Builder
	for _, tr := range a.Expr.Variables() {
		b.WriteString(tr.RootName())
		for _, s := range tr[1:] {
			if at, ok := s.(hcl.TraverseAttr); ok {
				b.WriteString("." + at.Name)
			}
		}
		b.WriteString(" ")
	}
	if call, ok := a.Expr.(*hclsyntax.FunctionCallExpr); ok {
		for _, arg := range call.Args {
			if obj, ok := arg.(*hclsyntax.ObjectConsExpr); ok {
				for _, it := range obj.Items {
					if k, diags := it.KeyExpr.Value(nil); !diags.HasErrors() {
						b.WriteString(`"` + k.AsString() + `" `)
					}
				}
			}
		}
	}
	return b.String()
}

func TestModuleTemplateVariablesMatchTheCall(t *testing.T) {
	src, err := awsModule.ReadFile("aws/nat64-user-data.sh.tftpl")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, diags := hclsyntax.ParseTemplate(src, "nat64-user-data.sh.tftpl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	used := map[string]bool{}
	for _, tr := range tmpl.Variables() {
		used[tr.RootName()] = true
	}
	delete(used, "c") // the for loop's iterator
	passed := map[string]bool{}
	walkBlocks(module(t)["nat64.tf"], func(b *hclsyntax.Block) {
		for _, a := range b.Body.Attributes {
			hclsyntax.VisitAll(a.Expr, func(n hclsyntax.Node) hcl.Diagnostics {
				call, ok := n.(*hclsyntax.FunctionCallExpr)
				if !ok || call.Name != "templatefile" || len(call.Args) != 2 {
					return nil
				}
				for _, it := range call.Args[1].(*hclsyntax.ObjectConsExpr).Items {
					if k, ok := it.KeyExpr.(*hclsyntax.ObjectConsKeyExpr); ok {
						passed[hcl.ExprAsKeyword(k.Wrapped)] = true
					}
				}
				return nil
			})
		}
	})
	if len(passed) == 0 {
		t.Fatal("no templatefile call found")
	}
	for n := range used {
		if !passed[n] {
			t.Errorf("the template uses %s, which nat64.tf does not pass", n)
		}
	}
	for n := range passed {
		if !used[n] {
			t.Errorf("nat64.tf passes %s, which the template does not use", n)
		}
	}
}

// TestNAT64UserDataIsValidBash renders the NAT64 template as
// templatefile() would and checks the script with bash -n (and ShellCheck
// when installed).
func TestNAT64UserDataIsValidBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	src, err := awsModule.ReadFile("aws/nat64-user-data.sh.tftpl")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, diags := hclsyntax.ParseTemplate(src, "nat64-user-data.sh.tftpl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	vars := map[string]cty.Value{
		"workload_cidrs": cty.ListVal([]cty.Value{cty.StringVal("2600:1f14:abc:de1e::/64"), cty.StringVal("2600:1f14:abc:deac::/64")}),
	}
	for _, k := range []string{"cluster", "region", "bucket", "name", "generation", "data_eni", "lifecycle_hook", "jool_key", "jool_sha256"} {
		vars[k] = cty.StringVal("value-of-" + k)
	}
	out, diags := tmpl.Value(&hcl.EvalContext{Variables: vars})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	script := filepath.Join(t.TempDir(), "nat64.sh")
	if err := os.WriteFile(script, []byte(out.AsString()), 0o600); err != nil {
		t.Fatal(err)
	}
	s := out.AsString()
	for _, want := range []string{
		"workload_subnets=('2600:1f14:abc:de1e::/64' '2600:1f14:abc:deac::/64' )",
		"jool_sha256='value-of-jool_sha256'",
		`echo "${jool_sha256}  ${archive}" | sha256sum --check --strict --quiet || die "digest mismatch for $jool_object"`,
		`jool instance display 2>/dev/null | grep -qw podmin || jool instance add podmin --netfilter --pool6 "$pool6"`,
		"ip6 daddr ${pool6} ip6 saddr != @workload drop",
		"ip6 daddr @nonglobal drop",
		`aws ec2 create-tags --region "$region" --resources "$stable_eni" --tags "Key=podmin:nat64-generation,Value=${generation}"`,
		"trap finish EXIT",
	} {
		if !strings.Contains(s, want+"\n") {
			t.Errorf("missing line: %s", want)
		}
	}
	// Instance metadata (169.254.0.0/16) is never a translation target.
	if !strings.Contains(s, "64:ff9b::a9fe:0/112") {
		t.Error("link-local IPv4 is not rejected")
	}
	// SSM Agent first; everything slow and every check before the stable
	// ENI moves; a real translated request before the lifecycle hook.
	last := -1
	for _, o := range []string{`dpkg -i "$ssm_deb"`, `sha256sum --check`, `modprobe jool`, `nft list chain inet podmin_nat64 prerouting`,
		`aws ec2 create-tags`, `aws ec2 detach-network-interface --region "$region" --attachment-id "$old_attachment"`,
		`aws ec2 attach-network-interface`, `ip netns exec`, `--lifecycle-action-result CONTINUE`} {
		i := strings.Index(s, o)
		if i < 0 || i < last {
			t.Fatalf("%q is missing or out of order", o)
		}
		last = i
	}
	if b, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, b)
	}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		if b, err := exec.Command(sc, "-s", "bash", script).CombinedOutput(); err != nil {
			t.Fatalf("shellcheck: %v\n%s", err, b)
		}
	}
}
