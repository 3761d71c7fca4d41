// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/vip"
)

// TestUpdatesDuringQueries replaces the record set back and forth while
// clients query over UDP and TCP. Every answer must come from one of the
// two sets: the stable Service always resolves to its VIP, the others to
// their VIP or NXDOMAIN, and nothing fails. Run with -race.
func TestUpdatesDuringQueries(t *testing.T) {
	s := startServer(t, service.Config{StatePath: statePath(t)})
	a := services([2]string{"product", "database"}, [2]string{"product", "web"})
	b := services([2]string{"product", "database"}, [2]string{"billing", "ledger"})
	if err := s.Update(a); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var updates atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			next := a
			if i%2 == 1 {
				next = b
			}
			if err := s.Update(next); err != nil {
				t.Error(err)
				return
			}
			updates.Add(1)
		}
	})
	names := map[string]netip.Addr{
		"database.product.svc.cluster.local.": vip.For(cluster, "product", "database"),
		"web.product.svc.cluster.local.":      vip.For(cluster, "product", "web"),
		"ledger.billing.svc.cluster.local.":   vip.For(cluster, "billing", "ledger"),
	}
	var clients sync.WaitGroup
	for i := range 8 {
		network := []string{"udp", "tcp"}[i%2]
		clients.Go(func() {
			for range 150 {
				for name, want := range names {
					r := query(t, network, s.Addr(), name, dns.TypeAAAA, false)
					switch {
					case r.Rcode == dns.RcodeNameError && name != "database.product.svc.cluster.local.":
					case r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1:
						if got := vipOf(t, r); got != want {
							t.Errorf("%s: %v, want %v", name, got, want)
						}
					default:
						t.Errorf("%s: rcode %s with %d answers", name, dns.RcodeToString[r.Rcode], len(r.Answer))
					}
				}
			}
		})
	}
	clients.Wait()
	close(stop)
	wg.Wait()
	if updates.Load() < 2 {
		t.Fatalf("only %d updates ran during the queries", updates.Load())
	}
	t.Logf("%d updates during 3600 queries", updates.Load())
}
