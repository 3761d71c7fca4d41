// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/builtins/deps/depstest"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/builtins/userdata"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/progress/progresstest"
)

// TestAWSSetupPublishesNodeBootstrap runs AWS setup with the real node
// bootstrap: the dependencies are resolved from the recorded upstream
// release APIs, published into the bucket, and the user data and Jool
// archive rendered from that manifest reach the OpenTofu/Terraform
// variables. A second setup transfers nothing.
func TestAWSSetupPublishesNodeBootstrap(t *testing.T) {
	ae := newAWSEnv(t)
	ctx := t.Context()
	up, boots := ae.realBootstrap(t)
	sink := &progresstest.Recorder{}
	ae.Transfers = sink
	opts := lifecycle.SetupOptions{VPCCIDR: "10.0.0.0/16", NAT64: "instance-type=m7i.large",
		NodeGroup: []string{"default", "workers,instance-type=m7i.large,zone=b"},
		OtelLogs:  "endpoint=https://otel.example.com/v1/logs,protocol=http,mtls=false"}

	// A refused confirmation writes nothing to the bucket, although the
	// plan it was shown was made with the staged dependencies' user data.
	// The staging layer keeps no streamed body here, so any read back of
	// a staged file would fail the setup.
	ae.keepAtMost = 1
	refused := errors.New("refused")
	refusedOpts := opts
	refusedOpts.Confirm = func(lifecycle.PlanSummary) error { return refused }
	if _, err := ae.Setup(ctx, refusedOpts); !errors.Is(err, refused) {
		t.Fatalf("refused setup: %v", err)
	}
	if all, err := objstore.ListAll(ctx, rawBucket(t, ae.srv, "demo-state"), ""); err != nil || len(all) != 0 {
		t.Fatalf("a refused setup wrote %d objects (%v), e.g. %v", len(all), err, all[:min(len(all), 3)])
	}
	if p := (*boots)[0].Published(); p != nil {
		t.Fatalf("a refused setup published the node dependencies: %+v", p)
	}
	if seen, err := os.ReadFile(ae.seen); err != nil || !bytes.Contains(seen, []byte("user_data")) {
		t.Fatalf("the refused plan was not made with the user data (%v)", err)
	}
	*boots = nil

	res, err := ae.Setup(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || len(*boots) != 1 {
		t.Fatalf("setup %+v with %d bootstraps", res, len(*boots))
	}
	first := (*boots)[0].Published()
	if first == nil || !first.Written || len(first.Uploaded) == 0 || len(first.Images) != 1 || up.Downloaded() == 0 {
		t.Fatalf("first publication %+v after %d downloads", first, up.Downloaded())
	}
	t.Logf("first setup: %d files uploaded, %d images, %d downloads", len(first.Uploaded), len(first.Images), up.Downloaded())
	// Downloads and uploads report their bytes to the Env's transfers.
	var moved = map[string]int64{}
	for _, tr := range sink.Transfers() {
		if !tr.Ended || tr.Err != nil || tr.Done != tr.Items {
			t.Fatalf("transfers:\n%s", sink)
		}
		moved[tr.Title] += tr.Moved
	}
	if moved["download node dependencies"] == 0 || moved["upload node dependencies"] != moved["download node dependencies"] {
		t.Fatalf("transfers:\n%s", sink)
	}
	m := first.Manifest
	for _, key := range []string{"kubelet", "containerd", "podmin-agent", "fluent-bit", "libpq5"} {
		for _, a := range []deps.Arch{"amd64", "arm64"} {
			if _, ok := m.Dependencies[key][a]; !ok {
				t.Errorf("manifest lacks %s for %s", key, a)
			}
		}
	}
	jool, ok := m.Dependencies["jool"]["amd64"]
	if !ok || !strings.Contains(jool.Path, "6.12.41+deb13-cloud-amd64") {
		t.Fatalf("Jool for the AMI's kernel: %+v", m.Dependencies["jool"])
	}

	// The variables OpenTofu/Terraform ran with carry the rendered user
	// data of each NodeGroup and the verified Jool archive.
	data, err := os.ReadFile(filepath.Join(infra.ModuleDir(ae.Dirs.Cache, "demo"), infra.VarsFile))
	if err != nil {
		t.Fatal(err)
	}
	var vars infra.Vars
	if err := json.Unmarshal(data, &vars); err != nil {
		t.Fatal(err)
	}
	// The cluster configuration the agents read carries the canonical
	// --otel-logs value.
	if vars.OtelLogs != "endpoint=https://otel.example.com/v1/logs" {
		t.Fatalf("otel_logs %q is not the canonical value", vars.OtelLogs)
	}
	for name, arch := range map[string]string{"default": "arm64", "workers": "amd64"} {
		ng := vars.NodeGroups[name]
		want, err := userdata.RenderNode(userdata.Node{Cluster: "demo", NodeGroup: name, Bucket: "demo-state", Region: vars.Region,
			Arch: deps.Arch(arch), Manifest: m, OTelLogs: true})
		if err != nil {
			t.Fatal(err)
		}
		if ng.Arch != arch || ng.UserData != want.Base64 {
			t.Fatalf("NodeGroup %s (%s): user data is not the one rendered from the published manifest", name, ng.Arch)
		}
		script := gunzipBase64(t, ng.UserData)
		kubelet := m.Dependencies["kubelet"][deps.Arch(arch)]
		if !strings.Contains(script, path.Base(kubelet.Path)) || !strings.Contains(script, "demo-state") {
			t.Fatalf("NodeGroup %s user data lacks its kubelet %s:\n%s", name, kubelet.Path, script)
		}
	}
	sum := depstest.Digest("sha256", depstest.Body("jool-4.1.14-6.12.41+deb13-cloud-amd64.tar.gz"))
	if got := vars.JoolArchives["amd64"]; got.Key != jool.Path || got.SHA256 != sum {
		t.Fatalf("Jool archive %+v, want %s with SHA-256 %s", got, jool.Path, sum)
	}
	seen, err := os.ReadFile(ae.seen)
	if err != nil || !bytes.Contains(seen, []byte(vars.NodeGroups["default"].UserData)) || !bytes.Contains(seen, []byte(sum)) {
		t.Fatalf("OpenTofu/Terraform was not shown the user data and the Jool digest (%v)", err)
	}

	// A second setup finds the manifest current: no download, no upload,
	// no manifest write, and the same user data.
	before, transfers := up.Downloaded(), len(sink.Transfers())
	if _, err := ae.Setup(ctx, opts); err != nil {
		t.Fatal(err)
	}
	second := (*boots)[len(*boots)-1].Published()
	if len(*boots) != 2 || second == nil || second.Written || len(second.Uploaded)+len(second.Images) != 0 || up.Downloaded() != before {
		t.Fatalf("second publication %+v, %d downloads", second, up.Downloaded()-before)
	}
	if len(sink.Transfers()) != transfers {
		t.Fatalf("the second setup transferred:\n%s", sink)
	}
	again, err := os.ReadFile(filepath.Join(infra.ModuleDir(ae.Dirs.Cache, "demo"), infra.VarsFile))
	if err != nil {
		t.Fatal(err)
	}
	var vars2 infra.Vars
	if err := json.Unmarshal(again, &vars2); err != nil {
		t.Fatal(err)
	}
	if vars2.NodeGroups["workers"].UserData != vars.NodeGroups["workers"].UserData {
		t.Fatal("the user data changed without a dependency change")
	}
}

// realBootstrap makes every AWS setup of ae use the real node bootstrap
// over the recorded upstream releases; it returns the upstream and the
// bootstraps made so far.
func (ae *awsEnv) realBootstrap(t *testing.T) (*depstest.Upstream, *[]*lifecycle.AWSBootstrap) {
	up := depstest.NewUpstream(t)
	var boots []*lifecycle.AWSBootstrap
	client := ae.ec2.Client(t)
	ae.bootstrap = func(h lifecycle.Host) lifecycle.NodeBootstrap {
		b := &lifecycle.AWSBootstrap{Host: h, EC2: client, Client: up.Server.Client(), Resolver: up.Resolver(), StageKeepAtMost: ae.keepAtMost,
			Mirror: depstest.MirrorImage, Check: depstest.CheckImage, ImageManifestURL: up.ImageManifestURL}
		boots = append(boots, b)
		return b
	}
	return up, &boots
}

func gunzipBase64(t *testing.T, s string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
