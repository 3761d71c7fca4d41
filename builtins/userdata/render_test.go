// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/internal/otellogs"
)

// canonicalManifest records every dependency for both architectures.
func canonicalManifest(t *testing.T) *deps.Manifest {
	t.Helper()
	var files []deps.File
	for i, d := range deps.Definitions {
		for _, a := range deps.Archs {
			alg, n := "sha512", 128
			if d.Key == "containerd" || d.Key == "coredns" {
				alg, n = "sha256", 64
			}
			files = append(files, deps.File{Key: d.Key, Arch: a, Version: "1.0." + string(rune('0'+i)),
				URL:    "https://example.com/" + d.Key,
				Path:   "dependencies/" + d.Key + "/" + d.Key + "-v1.0." + string(rune('0'+i)) + "-linux-" + string(a),
				Digest: alg + ":" + strings.Repeat(string(rune('a'+i)), n), Size: int64(100 + i)})
		}
	}
	return deps.NewManifest(files, map[string]deps.ImageEntry{"pause": {Version: "3.10.2", Source: "registry.k8s.io/pause:3.10.2",
		Path: "mirror/registry.k8s.io/pause", Digest: "sha256:" + strings.Repeat("3", 64), Size: 1090874}})
}

func node(t *testing.T, a deps.Arch) Node {
	return Node{Cluster: "prod-eu", NodeGroup: "workers", Bucket: "podmin-prod-eu", Region: "eu-west-1", Arch: a, Manifest: canonicalManifest(t)}
}

// lint runs bash -n and ShellCheck on a rendered script.
func lint(t *testing.T, script []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "user-data.sh")
	if err := os.WriteFile(p, script, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Log("shellcheck not installed: only bash -n ran (make lint runs ShellCheck)")
		return
	}
	if out, err := exec.Command(sc, "--shell=bash", "--severity=style", p).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}

func lines(script []byte) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(string(script), "\n") {
		m[strings.TrimSpace(l)] = true
	}
	return m
}

func TestRenderEveryArchitecture(t *testing.T) {
	for _, a := range deps.Archs {
		t.Run(string(a), func(t *testing.T) {
			r, err := RenderNode(node(t, a))
			if err != nil {
				t.Fatal(err)
			}
			lint(t, r.Script)
			t.Logf("%s: script %d bytes, gzip %d bytes, base64 %d bytes (limit %d)", a, len(r.Script), len(r.Gzip), len(r.Base64), MaxUserData)
			if len(r.Gzip) >= MaxUserData || len(r.Base64) >= MaxUserData {
				t.Fatalf("user-data %d/%d bytes is over the 16 KiB limit", len(r.Gzip), len(r.Base64))
			}
			// Base64 once of the gzip of exactly the script.
			gz, err := base64.StdEncoding.DecodeString(r.Base64)
			if err != nil || !bytes.Equal(gz, r.Gzip) {
				t.Fatal("base64 does not decode to the gzip bytes")
			}
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := io.ReadAll(zr)
			if !bytes.Equal(plain, r.Script) {
				t.Fatal("gzip does not hold the script")
			}
			m := canonicalManifest(t)
			have := lines(r.Script)
			other := deps.ARM64
			if a == deps.ARM64 {
				other = deps.AMD64
			}
			for key, archs := range m.Dependencies {
				d, _ := deps.Lookup(key)
				row := "'" + d.Canonical + "|" + archs[a].Path + "|" + archs[a].Digest + "'"
				want := d.Optional == deps.Always
				if have[row] != want {
					t.Errorf("row %s present=%v, want %v", row, have[row], want)
				}
				if strings.Contains(string(r.Script), archs[other].Path) {
					t.Errorf("%s user-data mentions the %s object %s", a, other, archs[other].Path)
				}
			}
			for _, want := range []string{
				"#!/bin/bash",
				"set -euo pipefail",
				"arch='" + string(a) + "'",
				`aws s3 sync "s3://${bucket}/dependencies/" "$downloads/" --exclude '*' "${includes[@]}" \`,
				`includes+=(--include "${object#dependencies/}")`,
				`sha512) got=$(sha512sum "$file") ;;`,
				`[[ "${got%% *}" == "$want" ]] || die "digest mismatch for $object"`,
				`mv -f "$file" "$deps/$name"`,
				`tar -xzf "$deps/containerd.tar.gz" -C /usr/local --no-same-owner --exclude 'bin/containerd-shim-runc-v*' bin/`,
				`rm -f /usr/local/bin/runc /usr/local/sbin/runc`,
				`install_gvisor "$deps/gvisor.tar.bz2" /usr/local/bin`,
				"default_runtime_name = 'runsc'",
				"runtime_type = 'io.containerd.runsc.v1'",
				"sandbox = '${pause_image}'",
				"pause_image='registry.podmin.internal/mirror/registry.k8s.io/pause:3.10.2'",
				"runtime-endpoint: unix://${containerd_sock}",
				"image-endpoint: unix://${containerd_sock}",
				"containerd_sock=/run/podmin/containerd/containerd.sock",
				"staticPodPath: /etc/podmin/manifests",
				PodsAPIGate + ": true",
				"kubeReserved:", "systemReserved:", "cpu: 100m", "memory: 128Mi", "memory: 96Mi", "- pods",
				"readOnlyPort: 0",
				`aws ec2 assign-ipv6-addresses --region "$region" --endpoint-url "$ec2_endpoint" --network-interface-id "$pod_eni" --ipv6-prefix-count 1 >/dev/null`,
				`[[ "$pod_prefix" == */80 ]] || die "delegated prefix $pod_prefix is not a /80"`,
				`ip -6 addr replace "${pod_eni_ip}/128" dev "$pod_if"`,
				`ip -6 rule add from "$PODMIN_POD_PREFIX" table 80 priority 800`,
				"After=containerd.service podmin-pod-network.service podmin-agent.service coredns.service",
				"PODMIN_ARGS=--provider aws --bucket ${bucket} --region ${region} --cluster ${cluster} --nodegroup ${nodegroup} --ipv6-prefix ${pod_prefix}",
				"cluster.local:53 {",
				"file /var/lib/podmin/dns/cluster.local.zone {",
				"ExecStartPre=/bin/sh -c 'mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf'",
				"systemctl daemon-reload",
				`dpkg -i "$ssm_deb"`,
				`{"Agent": {"Region": "${region}", "UseDualStackEndpoint": true}}`,
				`s3_endpoint="${AWS_ENDPOINT_URL_S3:-${AWS_ENDPOINT_URL:-https://s3.dualstack.${region}.amazonaws.com}}"`,
				`ec2_endpoint="${AWS_ENDPOINT_URL_EC2:-${AWS_ENDPOINT_URL:-https://ec2.${region}.api.aws}}"`,
			} {
				if !have[want] {
					t.Errorf("missing line: %s", want)
				}
			}
			// The SSM Agent is installed before the dependency sync.
			if strings.Index(string(r.Script), `dpkg -i "$ssm_deb"`) > strings.Index(string(r.Script), "aws s3 sync") {
				t.Error("SSM Agent must come before the dependency transfer")
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(r.Script), "\n"), "\n") {
				if strings.TrimSpace(l) == "" || (strings.HasPrefix(strings.TrimSpace(l), "#") && !strings.HasPrefix(strings.TrimSpace(l), "#!")) {
					t.Fatalf("comment or blank line survived: %q", l)
				}
			}
		})
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	a, err := RenderNode(node(t, deps.ARM64))
	if err != nil {
		t.Fatal(err)
	}
	b, err := RenderNode(node(t, deps.ARM64))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Gzip, b.Gzip) || a.Base64 != b.Base64 {
		t.Fatal("identical input rendered different bytes")
	}
	n := node(t, deps.ARM64)
	n.NodeGroup = "web"
	c, _ := RenderNode(n)
	if c.Base64 == a.Base64 {
		t.Fatal("different input rendered the same bytes")
	}
}

func TestRenderRequiresCanonicalSet(t *testing.T) {
	n := node(t, deps.AMD64)
	delete(n.Manifest.Dependencies["kubelet"], deps.AMD64)
	delete(n.Manifest.Dependencies, "coredns")
	_, err := RenderNode(n)
	if err == nil || err.Error() != "the dependency manifest lacks kubelet, coredns for amd64: run setup to publish them" {
		t.Fatalf("err = %v", err)
	}
	n = node(t, deps.AMD64)
	n.OTelLogs = true
	r, err := RenderNode(n)
	if err != nil {
		t.Fatal(err)
	}
	lint(t, r.Script)
	if !strings.Contains(string(r.Script), "'libpq5.deb|") || !strings.Contains(string(r.Script), "otel_logs='true'") {
		t.Fatal("log-export packages missing with OTelLogs")
	}
	// Fluent Bit runs the configuration the agent renders, never the
	// package's stock one, and only once the agent has written it, the
	// headers secret read afresh before every start.
	for _, line := range []string{
		"ExecStart=/opt/fluent-bit/bin/fluent-bit -c /etc/podmin/fluent-bit.yaml",
		"ExecStartPre=/usr/bin/curl -fsS --retry 5 --retry-connrefused --max-time 60 -X POST http://127.0.0.1:8082" + otellogs.FluentBitConfigRoute,
		"ExecStartPre=/usr/bin/test -s /etc/podmin/fluent-bit.yaml",
		"systemctl enable fluent-bit.service",
	} {
		if !strings.Contains(string(r.Script), line+"\n") {
			t.Errorf("rendered script lacks the line %q", line)
		}
	}
	delete(n.Manifest.Dependencies, "fluent-bit")
	if _, err := RenderNode(n); err == nil || !strings.Contains(err.Error(), "lacks fluent-bit") {
		t.Fatalf("err = %v", err)
	}
	for _, bad := range []func(*Node){
		func(n *Node) { n.Cluster = "a'b" },
		func(n *Node) { n.Bucket = "$(reboot)" },
		func(n *Node) { n.Arch = "riscv64" },
		func(n *Node) {
			f := n.Manifest.Dependencies["kubelet"][deps.AMD64]
			f.Path = "dependencies/kubelet/x';reboot;'"
			n.Manifest.Dependencies["kubelet"][deps.AMD64] = f
		},
	} {
		n := node(t, deps.AMD64)
		bad(&n)
		if _, err := RenderNode(n); err == nil {
			t.Errorf("rendered unsafe input %+v", n)
		}
	}
}
