// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// opaqueKeys are the keys of the agent's bucket operations whose key
// argument comes from data (an index entry, a registry request) or from
// its configuration, so the code cannot name it: each is an example of
// every kind of key the call reaches. external names the node_policy
// statement granting an object outside the cluster bucket.
var opaqueKeys = map[string]struct {
	keys     []string
	external string
}{
	// Pod and Service payloads named by the deployment index.
	"agent/coordinator.desiredReader.strategy": {keys: []string{"nodegroups/workers/pods/sha512/0.yaml"}},
	"agent/staticpod.fetchPayload":             {keys: []string{"nodegroups/workers/pods/sha512/0.yaml", "services/default/web/sha512/0.yaml"}},
	"internal/state.FetchPayload":              {keys: []string{"nodegroups/workers/pods/sha512/0.yaml", "services/default/web/sha512/0.yaml"}},
	// The read-only registry: pushed images and setup's mirrored ones.
	"agent/registry.Handler.blob":            {keys: []string{"apps/example/web/blobs/sha256/0", "mirror/registry.k8s.io/pause/blobs/sha256/0"}},
	"agent/registry.Handler.readIndex":       {keys: []string{"apps/example/web/index.json", "mirror/registry.k8s.io/pause/index.json"}},
	"agent/registry.storeObjects.Open":       {keys: []string{"apps/example/web/blobs/sha256/0", "mirror/registry.k8s.io/pause/blobs/sha256/0"}},
	"agent/registry.storeObjects.OpenObject": {keys: []string{"apps/example/web/index.json", "mirror/registry.k8s.io/pause/blobs/sha256/0"}},
	"agent/registry.s3Objects.OpenObject":    {keys: []string{"apps/example/web/index.json", "mirror/registry.k8s.io/pause/blobs/sha256/0"}},
	"agent/telemetry.FetchObject":            {external: "OtelLogsCA"},
	"agent/workload.Manager.externalHolds":   {external: "WorkloadCAPublish"},
	"agent/workload.Manager.publishExternal": {external: "WorkloadCAPublish"},
}

// access is one IAM action on one object key ("" for the bucket itself).
type access struct{ action, key, by string }

// TestNodeBucketAccessIsGrantedByResource derives every object the node
// role reaches in the cluster bucket — each bucket operation the agent's
// reachable code calls, with the key its argument resolves to (or, where
// the key comes from data, opaqueKeys), and aws.sh's dependency sync —
// and requires iam.tf's node policy to grant each action on that object's
// ARN, not merely the action somewhere; and every cluster-bucket grant to
// be needed by one of them.
func TestNodeBucketAccessIsGrantedByResource(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the agent's packages")
	}
	a := agentReach(t)
	var need []access
	seen := map[string]bool{}
	for _, s := range a.sites {
		seen[s.fn] = true
		keys, ok := a.resolveKey(s.body, s.arg, 0)
		rooted := ok && len(keys) > 0
		for _, k := range keys {
			rooted = rooted && !strings.HasPrefix(k, "*")
		}
		opaque, listed := opaqueKeys[s.fn]
		switch {
		case rooted && listed:
			t.Errorf("%s (%s) resolves to %v: remove it from opaqueKeys", s.fn, s.at, keys)
			continue
		case !rooted && !listed:
			t.Errorf("%s calls %s at %s with a key the code does not name (%v): add the keys it reaches to opaqueKeys", s.fn, s.op, s.at, keys)
			continue
		case listed:
			keys = opaque.keys
		}
		for _, k := range keys {
			for _, act := range opActions[s.op] {
				if act == "s3:ListBucket" {
					need = append(need, access{act, "", s.fn + " " + s.op + " " + k})
					continue
				}
				need = append(need, access{act, strings.ReplaceAll(k, "*", "x"), s.fn + " " + s.op})
			}
		}
	}
	for fn := range opaqueKeys {
		if !seen[fn] {
			t.Errorf("opaqueKeys lists %s, which makes no bucket operation the agent reaches: remove it", fn)
		}
	}
	script, err := os.ReadFile("../userdata/aws.sh.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	syncs := regexp.MustCompile(`aws s3 (?:sync|cp) "s3://\$\{bucket\}/([^"]*)"`).FindAllStringSubmatch(string(script), -1)
	if len(syncs) == 0 {
		t.Fatal("aws.sh syncs nothing from the bucket: the derivation is broken")
	}
	for _, m := range syncs {
		need = append(need, access{"s3:GetObject", m[1] + "x", "aws.sh"}, access{"s3:ListBucket", "", "aws.sh"})
	}
	sort.Slice(need, func(i, j int) bool { return need[i].action+need[i].key < need[j].action+need[j].key })
	t.Logf("%d node accesses to the bucket derived", len(need))

	stmts := nodePolicyStatements(t)
	used := map[string]bool{}
	for _, n := range need {
		granted := false
		for _, st := range stmts {
			for _, r := range st.resources {
				if st.actions[n.action] && iamMatch(r, bucketARN(n.key)) {
					granted, used[st.sid+" "+n.action+" "+r] = true, true
				}
			}
		}
		if !granted {
			t.Errorf("iam.tf does not grant nodes %s on %s, which %s needs", n.action, bucketARN(n.key), n.by)
		}
	}
	for _, st := range stmts {
		for _, r := range st.resources {
			for act := range st.actions {
				if !used[st.sid+" "+act+" "+r] {
					t.Errorf("iam.tf grants nodes %s on %s (statement %s), which no node access needs: remove it", act, r, st.sid)
				}
			}
		}
	}
	for fn, o := range opaqueKeys {
		if o.external == "" {
			continue
		}
		if !slices.ContainsFunc(externalStatements(t), func(s string) bool { return s == o.external }) {
			t.Errorf("%s reads an external object that no node_policy statement %s grants", fn, o.external)
		}
	}
}

const testBucketARN = "arn:aws:s3:::demo-state"

func bucketARN(key string) string {
	if key == "" {
		return testBucketARN
	}
	return testBucketARN + "/" + key
}

// iamMatch matches an IAM resource pattern (* any run, ? one character).
func iamMatch(pattern, arn string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(arn)
}

// policyStatement is one statement of node_policy on the cluster bucket.
type policyStatement struct {
	sid       string
	actions   map[string]bool
	resources []string
}

// nodePolicyStatements returns node_policy's statements whose resources
// are in the cluster bucket, with local.bucket_arn as testBucketARN.
func nodePolicyStatements(t *testing.T) []policyStatement {
	t.Helper()
	var out []policyStatement
	eachNodeStatement(t, func(sid string, actions []string, resources []string) {
		st := policyStatement{sid: sid, actions: map[string]bool{}}
		for _, a := range actions {
			st.actions[a] = true
		}
		for _, r := range resources {
			r = strings.NewReplacer("${local.bucket_arn}", testBucketARN, "local.bucket_arn", testBucketARN).Replace(r)
			if strings.HasPrefix(r, testBucketARN) && !strings.Contains(r, "${") {
				st.resources = append(st.resources, r)
			}
		}
		if len(st.resources) > 0 {
			out = append(out, st)
		}
	})
	if len(out) == 0 {
		t.Fatal("node_policy has no statement on the cluster bucket: the parsing is broken")
	}
	return out
}

// externalStatements are the Sids of node_policy's statements on objects
// outside the cluster bucket.
func externalStatements(t *testing.T) []string {
	var out []string
	eachNodeStatement(t, func(sid string, _ []string, resources []string) {
		for _, r := range resources {
			if strings.Contains(r, ":s3:::${var.") || strings.Contains(r, ":s3:::${local.otel") {
				out = append(out, sid)
				return
			}
		}
	})
	return out
}

// eachNodeStatement calls fn with the Sid, literal actions and resource
// expressions (their source text, unquoted) of every statement of
// node_policy in iam.tf.
func eachNodeStatement(t *testing.T, fn func(sid string, actions, resources []string)) {
	t.Helper()
	src, err := awsModule.ReadFile("aws/iam.tf")
	if err != nil {
		t.Fatal(err)
	}
	var doc hclsyntax.Expression
	for _, b := range module(t)["iam.tf"].Blocks {
		if attr, ok := b.Body.Attributes["node_policy"]; ok && b.Type == "locals" {
			doc = attr.Expr
		}
	}
	if doc == nil {
		t.Fatal("iam.tf has no local node_policy")
	}
	text := func(e hclsyntax.Expression) string {
		r := e.Range()
		return strings.Trim(string(src[r.Start.Byte:r.End.Byte]), `"`)
	}
	_ = hclsyntax.VisitAll(doc, func(n hclsyntax.Node) hcl.Diagnostics {
		obj, ok := n.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return nil
		}
		var sid string
		var actions, resources []string
		for _, item := range obj.Items {
			k, _ := item.KeyExpr.Value(nil)
			if !k.IsKnown() || k.Type().FriendlyName() != "string" {
				continue
			}
			tuple, _ := item.ValueExpr.(*hclsyntax.TupleConsExpr)
			switch k.AsString() {
			case "Sid":
				sid = text(item.ValueExpr)
			case "Action":
				for _, e := range tuple.Exprs {
					actions = append(actions, text(e))
				}
			case "Resource":
				for _, e := range tuple.Exprs {
					resources = append(resources, text(e))
				}
			}
		}
		if actions != nil {
			fn(sid, actions, resources)
		}
		return nil
	})
}
