// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/rand"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
)

// storeClusterCA stores a cluster CA for cluster demo in the local
// secrets store of dataDir, as setup does.
func storeClusterCA(t *testing.T, dataDir string) {
	t.Helper()
	v, err := pki.GenerateClusterCA(rand.Reader, "demo", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	name, err := secrets.InternalSecret("demo", secrets.ClusterCA)
	if err != nil {
		t.Fatal(err)
	}
	if err := secretslocal.New(filepath.Join(dataDir, "secrets")).Create(context.Background(), name, secrets.Value(v)); err != nil {
		t.Fatal(err)
	}
}

var dnsServingRE = regexp.MustCompile(`msg="serving service DNS".* addr=(\S+)`)

func aaaa(t *testing.T, addr, name string) ([]netip.Addr, int) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeAAAA)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.AAAA); ok {
			ip, _ := netip.AddrFromSlice(a.AAAA)
			out = append(out, ip)
		}
	}
	return out, r.Rcode
}

// TestNoCASecretsStillPublishesPods: a cluster whose setup stored neither
// the workload CA key nor the cluster CA runs the agent without
// identities and coordination, and it still publishes every Pod and is
// ready.
func TestNoCASecretsStillPublishesPods(t *testing.T) {
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.DNSAddr, o.APIAddr = "127.0.0.1:0", "[::1]:0"
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	waitFor(t, 10*time.Second, "web.yaml", func() bool { return fileContains(filepath.Join(a.manifests, "web.yaml"), "hello:v1") })
	waitFor(t, 10*time.Second, "readiness", func() bool { code, _ := a.get(t, "/readyz"); return code == http.StatusOK })
	logs := a.logs.String()
	for _, want := range []string{"the cluster has no cluster CA yet", "the cluster has no workload CA key yet"} {
		if !strings.Contains(logs, want) || !strings.Contains(logs, "level=WARN") {
			t.Fatalf("log lacks the warning %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "serving service DNS") {
		t.Fatalf("Service DNS served without coordination:\n%s", logs)
	}
}

// TestClusterCAWithoutWorkloadKey: with the cluster CA but no workload CA
// key, the single agent leads, serves the Service's VIP from its own
// snapshot, and publishes Pods without identities.
func TestClusterCAWithoutWorkloadKey(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.DNSAddr, o.APIAddr = "127.0.0.1:0", "[::1]:0"
		storeClusterCA(t, o.DataDir)
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	waitFor(t, 10*time.Second, "web.yaml", func() bool { return fileContains(filepath.Join(a.manifests, "web.yaml"), "hello:v1") })
	m := dnsServingRE.FindStringSubmatch(a.logs.String())
	if m == nil {
		t.Fatalf("no Service DNS:\n%s", a.logs)
	}
	want := service.Identity("demo", "default", "web").VIP
	waitFor(t, 20*time.Second, "the web VIP in DNS", func() bool {
		got, rcode := aaaa(t, m[1], "web.default.svc.cluster.local.")
		return rcode == dns.RcodeSuccess && len(got) == 1 && got[0] == want
	})
	if _, rcode := aaaa(t, m[1], "api.default.svc.cluster.local."); rcode != dns.RcodeNameError {
		t.Fatalf("unknown Service rcode %d", rcode)
	}
	waitFor(t, 10*time.Second, "readiness", func() bool { code, _ := a.get(t, "/readyz"); return code == http.StatusOK })
	if logs := a.logs.String(); !strings.Contains(logs, "acquired the lease") || fileContains(filepath.Join(a.manifests, "web.yaml"), "identity-revision") {
		t.Fatalf("want a leader without workload identities:\n%s", logs)
	}
}

// TestServiceDNSPortTakenStillPublishesPods: a DNS address in use is
// reported in /readyz; Pods are still published.
func TestServiceDNSPortTakenStillPublishesPods(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.DNSAddr, o.APIAddr = taken.Addr().String(), "[::1]:0"
		storeClusterCA(t, o.DataDir)
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	waitFor(t, 10*time.Second, "web.yaml", func() bool { return fileContains(filepath.Join(a.manifests, "web.yaml"), "hello:v1") })
	code, body := a.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, componentDNS+": ") || !strings.Contains(body, EnvDNSAddr) {
		t.Fatalf("readyz %d %q", code, body)
	}
}
