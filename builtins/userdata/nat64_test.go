// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/deps"
)

const testKernel = "6.12.41+deb13-cloud-amd64"

func nat64(t *testing.T, a deps.Arch) NAT64 {
	m := canonicalManifest(t)
	m.Dependencies["jool"][a] = deps.File{Version: "4.1.14", URL: "https://example.com/jool",
		Path:   "dependencies/jool/jool-v4.1.14-" + testKernel + "-linux-" + string(a) + ".tar.gz",
		Digest: "sha256:" + strings.Repeat("9", 64), Size: 1234}
	return NAT64{Cluster: "prod-eu", Bucket: "podmin-prod-eu", Region: "eu-west-1", Arch: a, Generation: 7,
		StableENI: "eni-0123456789abcdef0", AutoScalingGroup: "podmin-prod-eu-nat64-a", LifecycleHook: "podmin-nat64-launch",
		Kernel: testKernel, Manifest: m, CheckHost: "ipv4.example.com",
		WorkloadSubnets: []netip.Prefix{netip.MustParsePrefix("2a05:d018:1:100::/64"), netip.MustParsePrefix("2a05:d018:1:101::/64")}}
}

func TestRenderNAT64(t *testing.T) {
	for _, a := range deps.Archs {
		t.Run(string(a), func(t *testing.T) {
			r, err := RenderNAT64(nat64(t, a))
			if err != nil {
				t.Fatal(err)
			}
			lint(t, r.Script)
			t.Logf("%s: script %d bytes, gzip %d bytes, base64 %d bytes", a, len(r.Script), len(r.Gzip), len(r.Base64))
			if len(r.Base64) >= MaxUserData {
				t.Fatalf("over the limit: %d", len(r.Base64))
			}
			s := string(r.Script)
			have := lines(r.Script)
			for _, want := range []string{
				"generation='7'",
				"stable_eni='eni-0123456789abcdef0'",
				"jool_object='dependencies/jool/jool-v4.1.14-" + testKernel + "-linux-" + string(a) + ".tar.gz'",
				"jool_digest='sha256:" + strings.Repeat("9", 64) + "'",
				"'2a05:d018:1:100::/64'",
				`sha256) got=$(sha256sum "$archive") ;;`,
				`[[ "${got%% *}" == "${jool_digest#*:}" ]] || die "digest mismatch for $jool_object"`,
				`jool instance display 2>/dev/null | grep -qw podmin || jool instance add podmin --netfilter --pool6 "$pool6"`,
				"sysctl -qw net.ipv6.conf.all.forwarding=1",
				"ip6 daddr ${pool6} ip6 saddr != @workload drop",
				"ip6 daddr @nonglobal drop",
				`aws ec2 create-tags --region "$region" --resources "$stable_eni" --tags "Key=podmin:nat64-generation,Value=${generation}"`,
				`ip netns exec "$ns" curl -6 -fsS -o /dev/null --max-time 20 --resolve "${check_host}:443:[${check_v6}]" "https://${check_host}/"`,
				"trap finish EXIT",
			} {
				if !have[want] {
					t.Errorf("missing line: %s", want)
				}
			}
			// Instance metadata (169.254.0.0/16) is never a translation target.
			if !strings.Contains(s, "64:ff9b::a9fe:0/112") {
				t.Error("link-local IPv4 is not rejected")
			}
			order := []string{`dpkg -i "$ssm_deb"`, `modprobe jool`, `nft list chain inet podmin_nat64 prerouting`,
				`aws ec2 create-tags`, `aws ec2 detach-network-interface --region "$region" --attachment-id "$old_attachment"`,
				`aws ec2 attach-network-interface`, `ip netns exec`, `--lifecycle-action-result CONTINUE`}
			last := -1
			for _, o := range order {
				i := strings.Index(s, o)
				if i < 0 || i < last {
					t.Fatalf("%q is missing or out of order", o)
				}
				last = i
			}
		})
	}
	a, _ := RenderNAT64(nat64(t, deps.ARM64))
	b, _ := RenderNAT64(nat64(t, deps.ARM64))
	if !bytes.Equal(a.Gzip, b.Gzip) {
		t.Fatal("not deterministic")
	}
}

func TestRenderNAT64Rejects(t *testing.T) {
	for name, bad := range map[string]func(*NAT64){
		"other kernel":    func(n *NAT64) { n.Kernel = "6.12.40+deb13-cloud-amd64" },
		"no jool":         func(n *NAT64) { delete(n.Manifest.Dependencies, "jool") },
		"ipv4 subnet":     func(n *NAT64) { n.WorkloadSubnets = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")} },
		"no subnets":      func(n *NAT64) { n.WorkloadSubnets = nil },
		"unsafe eni":      func(n *NAT64) { n.StableENI = "eni-1;reboot" },
		"zero generation": func(n *NAT64) { n.Generation = 0 },
	} {
		n := nat64(t, deps.AMD64)
		bad(&n)
		if _, err := RenderNAT64(n); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}
