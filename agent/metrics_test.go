// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/dataplane/dataplanetest"
)

// statsDataplane is a recording dataplane that also reports counters, as
// the kernel dataplane does.
type statsDataplane struct{ dataplanetest.Recording }

func (s *statsDataplane) Stats() (dataplane.Stats, error) {
	return dataplane.Stats{
		NewFlows: 3, Forwarded: 40, Reversed: 38, Repaired: 1, ICMPTranslated: 4,
		Drops:     map[dataplane.DropReason]uint64{dataplane.DropNoBackend: 2, dataplane.DropFragment: 5},
		Exhausted: []dataplane.Exhaustion{{Backend: netip.MustParseAddrPort("[2001:db8::5]:8443"), Protocol: dataplane.TCP, Refused: 7}},
	}, nil
}

// LockedMemory is what the kernel dataplane reports for its maps.
func (s *statsDataplane) LockedMemory() uint64 { return 5855976 }

// sampleRE matches one sample line: name{labels} value.
var sampleRE = regexp.MustCompile(`^([a-z_]+)\{([^}]*)\} (\S+)$`)

// scrape returns /metrics as family → samples (labels → value), checking
// that every sample's family was declared and carries the NodeGroup.
func scrape(t *testing.T, a *localAgent) map[string]map[string]float64 {
	t.Helper()
	code, body := a.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics answered %d", code)
	}
	out := map[string]map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(name)
			out[f[0]] = map[string]float64{}
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("malformed line %q", line)
		}
		samples, ok := out[m[1]]
		if !ok {
			t.Fatalf("sample of undeclared family: %q", line)
		}
		if !strings.HasPrefix(m[2], `nodegroup="workers"`) {
			t.Fatalf("sample without the NodeGroup: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("value of %q: %v", line, err)
		}
		samples[m[2]] = v
	}
	return out
}

// /metrics covers every subsystem a running agent has: reconciliation,
// leadership, the snapshot in use, Service DNS answers and the dataplane's
// counters, each family with its samples.
func TestMetricsCoverEverySubsystem(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	dp := &statsDataplane{}
	load := func(dataplane.Config) (coordinator.Dataplane, error) { return dp, nil }
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.NewDataplane = load
		o.DNSAddr, o.APIAddr, o.Dataplane = "127.0.0.1:0", "[::1]:0", DataplaneOn
		o.NodeAddr = netip.MustParseAddr("2600:1f14::1")
		storeClusterCA(t, o.DataDir)
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	waitFor(t, 20*time.Second, "ready and leading with web in the snapshot", func() bool {
		code, _ := a.get(t, "/readyz")
		m := scrape(t, a)
		return code == 200 && m["podmin_agent_leader"][`nodegroup="workers"`] == 1 && len(dp.Last()) == 1
	})
	dnsAddr := dnsServingRE.FindStringSubmatch(a.logs.String())[1]
	aaaa(t, dnsAddr, "web.default.svc.cluster.local.")
	if _, rcode := aaaa(t, dnsAddr, "nothing.default.svc.cluster.local."); rcode != dns.RcodeNameError {
		t.Fatalf("rcode %d", rcode)
	}
	m := scrape(t, a)
	ng := `nodegroup="workers"`
	checks := map[string]func(map[string]float64) bool{
		"podmin_agent_reconcile_passes_total":   func(s map[string]float64) bool { return s[ng] >= 1 },
		"podmin_agent_reconcile_failures_total": func(s map[string]float64) bool { _, ok := s[ng]; return ok },
		"podmin_agent_reconcile_restarts_total": func(s map[string]float64) bool { _, ok := s[ng]; return ok },
		"podmin_agent_pod_failures_total":       func(s map[string]float64) bool { return len(s) == 0 },
		"podmin_agent_reconcile_reads_total": func(s map[string]float64) bool {
			return len(s) == 4 && s[ng+`,read="index"`]+s[ng+`,read="view"`] >= 1
		},
		"podmin_agent_reconcile_stale_views_total":              func(s map[string]float64) bool { _, ok := s[ng]; return ok },
		"podmin_agent_reconcile_last_success_timestamp_seconds": func(s map[string]float64) bool { return time.Since(time.Unix(int64(s[ng]), 0)) < time.Minute },
		"podmin_agent_index_age_seconds":                        func(s map[string]float64) bool { return s[ng] >= 0 && s[ng] < 10 },
		"podmin_agent_leader":                                   func(s map[string]float64) bool { return s[ng] == 1 },
		"podmin_agent_leader_term":                              func(s map[string]float64) bool { return s[ng] >= 1 },
		"podmin_agent_snapshot_term":                            func(s map[string]float64) bool { return s[ng] >= 1 },
		"podmin_agent_snapshot_generation":                      func(s map[string]float64) bool { return s[ng] >= 1 },
		"podmin_agent_snapshot_revision":                        func(s map[string]float64) bool { return s[ng] >= 1 },
		"podmin_agent_snapshot_age_seconds":                     func(s map[string]float64) bool { return s[ng] >= 0 && s[ng] < 35 },
		"podmin_agent_dns_answers_total": func(s map[string]float64) bool {
			return s[ng+`,rcode="NOERROR"`] >= 1 && s[ng+`,rcode="NXDOMAIN"`] >= 1
		},
		// The deployment's own families (coordinator.DeploymentStatus): applied,
		// readiness unknown without a kubelet, no error.
		"podmin_agent_deployment_applied":                   func(s map[string]float64) bool { return s[ng+`,deployment="web"`] == 1 },
		"podmin_agent_deployment_ready":                     func(s map[string]float64) bool { return s[ng+`,deployment="web"`] == -1 },
		"podmin_agent_deployment_restarts":                  func(s map[string]float64) bool { _, ok := s[ng+`,deployment="web"`]; return ok },
		"podmin_agent_deployment_waiting":                   func(s map[string]float64) bool { return s[ng+`,deployment="web"`] == 0 },
		"podmin_agent_deployment_error":                     func(s map[string]float64) bool { return s[ng+`,deployment="web",kind=""`] == 0 },
		"podmin_agent_deployment_applied_timestamp_seconds": func(s map[string]float64) bool { return s[ng+`,deployment="web"`] > 0 },
		"podmin_agent_dataplane_packets_total": func(s map[string]float64) bool {
			return len(s) == 5 && s[ng+`,result="forwarded"`] == 40 && s[ng+`,result="icmp_translated"`] == 4
		},
		"podmin_agent_dataplane_drops_total": func(s map[string]float64) bool {
			return len(s) == len(dataplane.DropReasons()) && s[ng+`,reason="no_backend"`] == 2 && s[ng+`,reason="fragment"`] == 5
		},
		"podmin_agent_dataplane_nat_exhausted_total": func(s map[string]float64) bool {
			return len(s) == 1 && s[ng+`,backend="[2001:db8::5]:8443",protocol="TCP"`] == 7
		},
		"podmin_agent_dataplane_locked_bytes": func(s map[string]float64) bool { return s[ng] == 5855976 },
	}
	// A family without samples is not written (the text format has
	// nothing to say of it): no Pod failed, so no Pod's failures.
	sampleless := map[string]bool{"podmin_agent_pod_failures_total": true}
	for family, ok := range checks {
		samples, declared := m[family]
		if !declared && !sampleless[family] || !ok(samples) {
			t.Errorf("%s: %v (declared %v)", family, samples, declared)
		}
	}
	for family := range m {
		if _, known := checks[family]; !known {
			t.Errorf("family %s is not checked by this test", family)
		}
	}
}
