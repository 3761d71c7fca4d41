// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"go/ast"
	"go/types"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"golang.org/x/tools/go/packages"

	"podmin.dev/podmin/internal/cloud"
	awscloud "podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// sdkService is the import path prefix of the AWS SDK's service clients.
const sdkService = "github.com/aws/aws-sdk-go-v2/service/"

// TestNodeCallsAreGrantedAndDualStack derives every AWS API call a node
// makes — the aws CLI commands of aws.sh and the SDK operations the agent
// can reach from its main function — and requires the node role's policy
// (iam.tf) to grant each one, and each to go to a dual-stack endpoint: the
// CLI's --endpoint-url or AWS_USE_DUALSTACK_ENDPOINT, the SDK clients'
// UseDualStackEndpoint.
func TestNodeCallsAreGrantedAndDualStack(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the agent's packages")
	}
	script, err := os.ReadFile("../userdata/aws.sh.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	cli := cliCalls(t, string(script))
	sdk := agentSDKCalls(t)
	t.Logf("aws.sh calls %v; the agent's SDK clients call %v", cli, sdk)
	if len(cli) == 0 || len(sdk) == 0 {
		t.Fatalf("derived no calls (aws.sh %v, agent %v): the derivation is broken", cli, sdk)
	}
	granted := nodePolicyActions(t)
	need := map[string][]string{}
	for _, c := range cli {
		for _, a := range cliActions(c) {
			need[a] = append(need[a], "aws.sh: aws "+c)
		}
	}
	services := map[string]bool{}
	for _, c := range sdk {
		svc, op, _ := strings.Cut(c, ":")
		services[svc] = true
		for _, a := range sdkActions(svc, op) {
			need[a] = append(need[a], "agent: "+c)
		}
	}
	for a, by := range need {
		if !granted[a] {
			t.Errorf("iam.tf does not grant %s to nodes, which %v need", a, by)
		}
	}
	for a := range granted {
		if _, ok := need[a]; !ok {
			t.Errorf("iam.tf grants nodes %s, which no node call needs: remove it", a)
		}
	}
	for svc := range services {
		state, ok := agentClientDualStack(t, svc)
		if !ok {
			t.Errorf("the agent calls %s, whose client's endpoint this test does not check: add it", svc)
		} else if state != awssdk.DualStackEndpointStateEnabled {
			t.Errorf("the agent's %s client is not dual-stack (%v): IPv6-only nodes cannot reach it", svc, state)
		}
	}
}

var (
	awsCommandRE  = regexp.MustCompile(`(?m)^[^#\n]*?\baws\s+([a-z0-9-]+)\s+([a-z0-9-]+)([^\n]*)$`)
	endpointArgRE = regexp.MustCompile(`--endpoint-url\s+"?\$\{?(\w+)\}?"?`)
)

// cliCalls returns "service command" for every aws CLI call in script and
// checks that each goes to a dual-stack endpoint.
func cliCalls(t *testing.T, script string) []string {
	t.Helper()
	dualAll := strings.Index(script, "export AWS_USE_DUALSTACK_ENDPOINT=true")
	var out []string
	for _, m := range awsCommandRE.FindAllStringSubmatchIndex(script, -1) {
		svc, cmd, rest := script[m[2]:m[3]], script[m[4]:m[5]], script[m[6]:m[7]]
		if svc == "configure" {
			continue
		}
		call := svc + " " + cmd
		out = append(out, call)
		if e := endpointArgRE.FindStringSubmatch(rest); e != nil {
			def := regexp.MustCompile(`(?m)^` + e[1] + `="([^"]+)"`).FindStringSubmatch(script)
			if def == nil || !strings.Contains(def[1], ".dualstack.") && !strings.Contains(def[1], ".api.aws") {
				t.Errorf("aws.sh: aws %s goes to $%s = %q, not a dual-stack endpoint", call, e[1], def)
			}
		} else if dualAll < 0 || dualAll > m[0] {
			t.Errorf("aws.sh: aws %s names no --endpoint-url and runs before export AWS_USE_DUALSTACK_ENDPOINT=true", call)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// cliActions maps an aws CLI call to the IAM actions it needs.
func cliActions(call string) []string {
	svc, cmd, _ := strings.Cut(call, " ")
	switch call {
	case "s3 sync", "s3 cp":
		return []string{"s3:ListBucket", "s3:GetObject"}
	}
	var b strings.Builder
	for _, w := range strings.Split(cmd, "-") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return []string{svc + ":" + b.String()}
}

// sdkActions maps an SDK operation to the IAM actions it needs.
func sdkActions(svc, op string) []string {
	if svc == "s3" {
		switch op {
		case "HeadObject":
			return []string{"s3:GetObject"}
		case "ListObjectsV2", "HeadBucket":
			return []string{"s3:ListBucket"}
		case "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload":
			return []string{"s3:PutObject"}
		}
	}
	return []string{svc + ":" + op}
}

// agentClientDualStack reports the dual-stack setting of the client the
// agent makes for svc, without a custom endpoint.
func agentClientDualStack(t *testing.T, svc string) (awssdk.DualStackEndpointState, bool) {
	t.Helper()
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SSM", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_PROFILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	ctx := t.Context()
	opts := awscloud.SecretsOptions{Region: "us-west-2"}
	switch svc {
	case "s3":
		b, err := awscloud.Provider{}.OpenBucket(ctx, cloud.BucketRef{Bucket: "demo-state", Region: "us-west-2"})
		if err != nil {
			t.Fatal(err)
		}
		return b.(*s3store.Bucket).Client().Options().EndpointOptions.UseDualStackEndpoint, true
	case "ssm":
		c, err := awscloud.NewSSM(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c.Options().EndpointOptions.UseDualStackEndpoint, true
	case "secretsmanager":
		c, err := awscloud.NewSecretsManager(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c.Options().EndpointOptions.UseDualStackEndpoint, true
	}
	return 0, false
}

// nodePolicyActions returns every action the node role's policy document
// (local.node_policy in iam.tf) names, its optional statements included.
func nodePolicyActions(t *testing.T) map[string]bool {
	t.Helper()
	var doc hclsyntax.Expression
	for _, b := range module(t)["iam.tf"].Blocks {
		if attr, ok := b.Body.Attributes["node_policy"]; ok && b.Type == "locals" {
			doc = attr.Expr
		}
	}
	if doc == nil {
		t.Fatal("iam.tf has no local node_policy")
	}
	out := map[string]bool{}
	_ = hclsyntax.VisitAll(doc, func(n hclsyntax.Node) hcl.Diagnostics {
		obj, ok := n.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return nil
		}
		for _, item := range obj.Items {
			if k, _ := item.KeyExpr.Value(nil); !k.IsKnown() || k.AsString() != "Action" {
				continue
			}
			tuple, ok := item.ValueExpr.(*hclsyntax.TupleConsExpr)
			if !ok {
				t.Fatalf("iam.tf: an Action of node_policy is not a list of literal actions")
			}
			for _, e := range tuple.Exprs {
				v, diags := e.Value(nil)
				if diags.HasErrors() {
					t.Fatalf("iam.tf: an action of node_policy is not a literal: %s", diags.Error())
				}
				out[v.AsString()] = true
			}
		}
		return nil
	})
	return out
}

// agentSDKCalls returns "service:Operation" for every AWS SDK operation
// whose input the agent's code can build on a path from its main function.
// Reachability is class-hierarchy analysis over Podmin's own packages: a
// call of an interface method reaches every Podmin method implementing it,
// and a Podmin value handed to a library as one of the library's
// interfaces (an http.Handler, a gRPC service) reaches that interface's
// methods.
func agentSDKCalls(t *testing.T) []string {
	t.Helper()
	a := agentReach(t)
	var out []string
	for c := range a.calls {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// agentReach walks every function reachable from the agent's main
// function (see agentSDKCalls for how), recording what the bucket-access
// test needs too.
func agentReach(t *testing.T) *reach {
	t.Helper()
	list, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "podmin.dev/podmin/cmd/podmin-agent").Output()
	if err != nil {
		t.Fatalf("go list the agent's packages: %v", err)
	}
	var own []string
	for _, p := range strings.Fields(string(list)) {
		if p == "podmin.dev/podmin" || strings.HasPrefix(p, "podmin.dev/podmin/") {
			own = append(own, p)
		}
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports}
	pkgs, err := packages.Load(cfg, own...)
	if err != nil {
		t.Fatal(err)
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		t.Fatalf("%d errors loading the agent's packages", n)
	}
	a := &reach{pkgs: pkgs, decls: map[*types.Func]funcBody{}, done: map[*types.Func]bool{}, calls: map[string]bool{}, callers: map[*types.Func][]callSite{}}
	var roots []funcBody
	for _, p := range pkgs {
		for _, f := range p.Syntax {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					fn, _ := p.TypesInfo.Defs[d.Name].(*types.Func)
					if fn == nil || d.Body == nil {
						continue
					}
					a.decls[fn] = funcBody{d.Body, p.TypesInfo, fn}
					if d.Recv == nil && (d.Name.Name == "init" || d.Name.Name == "main" && p.Name == "main") {
						roots = append(roots, funcBody{d.Body, p.TypesInfo, fn})
					}
				case *ast.GenDecl:
					// Package-level variables are initialized at start.
					roots = append(roots, funcBody{d, p.TypesInfo, nil})
				}
			}
			scope := p.Types.Scope()
			for _, n := range scope.Names() {
				if tn, ok := scope.Lookup(n).(*types.TypeName); ok && !tn.IsAlias() {
					if named, ok := tn.Type().(*types.Named); ok && named.TypeParams() == nil && !types.IsInterface(named) {
						a.types = append(a.types, named)
					}
				}
			}
		}
	}
	for _, r := range roots {
		a.visit(r)
	}
	for len(a.queue) > 0 {
		fn := a.queue[0]
		a.queue = a.queue[1:]
		a.visit(a.decls[fn])
	}
	return a
}

type funcBody struct {
	node ast.Node
	info *types.Info
	// fn is the declared function, nil for package-level declarations.
	fn *types.Func
}

// reach is a worklist over Podmin's function declarations.
type reach struct {
	pkgs  []*packages.Package
	decls map[*types.Func]funcBody
	types []*types.Named
	done  map[*types.Func]bool
	queue []*types.Func
	calls map[string]bool
	// sites are the bucket operations the reached code calls.
	sites []bucketSite
	// callers are the reached calls of each Podmin function.
	callers map[*types.Func][]callSite
}

func (a *reach) add(fn *types.Func) {
	fn = fn.Origin()
	if _, ok := a.decls[fn]; ok && !a.done[fn] {
		a.done[fn] = true
		a.queue = append(a.queue, fn)
	}
}

// implementations adds every Podmin method that implements iface's method
// name.
func (a *reach) implementations(iface *types.Interface, pkg *types.Package, name string) {
	for _, named := range a.types {
		for _, typ := range []types.Type{named, types.NewPointer(named)} {
			if !types.Implements(typ, iface) {
				continue
			}
			if sel := types.NewMethodSet(typ).Lookup(pkg, name); sel != nil {
				a.add(sel.Obj().(*types.Func))
			}
		}
	}
}

// handedOver adds the methods of iface that a Podmin value of type typ
// offers a library it is passed to.
func (a *reach) handedOver(typ, target types.Type) {
	iface, ok := target.Underlying().(*types.Interface)
	if !ok || typ == nil || types.IsInterface(typ) {
		return
	}
	if n, ok := target.(*types.Named); ok && n.Obj().Pkg() != nil && strings.HasPrefix(n.Obj().Pkg().Path(), "podmin.dev/podmin") {
		return // Podmin's own interfaces: their calls are seen
	}
	ms := types.NewMethodSet(typ)
	for i := 0; i < iface.NumMethods(); i++ {
		m := iface.Method(i)
		if sel := ms.Lookup(m.Pkg(), m.Name()); sel != nil {
			a.add(sel.Obj().(*types.Func))
		}
	}
}

func (a *reach) visit(b funcBody) {
	info := b.info
	ast.Inspect(b.node, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			fn, ok := info.Uses[n].(*types.Func)
			if !ok {
				return true
			}
			if recv := fn.Signature().Recv(); recv != nil && types.IsInterface(recv.Type()) {
				a.implementations(recv.Type().Underlying().(*types.Interface), fn.Pkg(), fn.Name())
			}
			a.add(fn)
		case *ast.CompositeLit:
			typ := info.TypeOf(n)
			if p, ok := typ.(*types.Pointer); ok {
				typ = p.Elem()
			}
			if named, ok := typ.(*types.Named); ok && named.Obj().Pkg() != nil {
				path, name := named.Obj().Pkg().Path(), named.Obj().Name()
				if svc, ok := strings.CutPrefix(path, sdkService); ok && strings.HasSuffix(name, "Input") && !strings.Contains(svc, "/") {
					a.calls[svc+":"+strings.TrimSuffix(name, "Input")] = true
				}
			}
		case *ast.CallExpr:
			sig, ok := info.TypeOf(n.Fun).(*types.Signature)
			if !ok {
				return true
			}
			if s, ok := a.bucketOp(b, n); ok {
				a.sites = append(a.sites, s)
			}
			if fn := calledFunc(info, n); fn != nil {
				a.callers[fn.Origin()] = append(a.callers[fn.Origin()], callSite{b, n.Args})
			}
			for i, arg := range n.Args {
				var param types.Type
				switch {
				case sig.Variadic() && i >= sig.Params().Len()-1:
					if s, ok := sig.Params().At(sig.Params().Len() - 1).Type().(*types.Slice); ok {
						param = s.Elem()
					}
				case i < sig.Params().Len():
					param = sig.Params().At(i).Type()
				}
				if param != nil {
					a.handedOver(info.TypeOf(arg), param)
				}
			}
		}
		return true
	})
}
