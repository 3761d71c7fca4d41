// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// TestQueriesSeeWholeRecordSets swaps between two record sets that differ
// in two names at once. A query reads the set once, so within one read
// the two names are both present or both absent: no query can observe a
// half-applied update.
func TestQueriesSeeWholeRecordSets(t *testing.T) {
	s := New(Config{})
	with := []Service{Identity("prod", "product", "api"), Identity("prod", "product", "web")}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			set := with
			if i%2 == 1 {
				set = nil
			}
			if err := s.Update(set); err != nil {
				t.Error(err)
				return
			}
		}
	})
	q := func(name string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeAAAA)
		return m
	}
	api, web := q("api.product.svc.cluster.local."), q("web.product.svc.cluster.local.")
	seen := map[bool]int{}
	for range 200000 {
		set := s.records.Load()
		hasAPI := answer(set, api, DefaultMaxUDPPayload).Rcode == dns.RcodeSuccess
		hasWeb := answer(set, web, DefaultMaxUDPPayload).Rcode == dns.RcodeSuccess
		if hasAPI != hasWeb {
			close(stop)
			wg.Wait()
			panic("a record set was half applied")
		}
		seen[hasAPI]++
	}
	close(stop)
	wg.Wait()
	t.Logf("sets seen: with %d, without %d", seen[true], seen[false])
}
