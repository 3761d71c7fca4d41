// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/vip"
)

// The agent runs the server as one of its components.
var _ interface {
	Name() string
	Start(context.Context) error
	Stop(context.Context) error
} = (*service.Server)(nil)

// goResolver is Go's own stub resolver pointed at addr: an independent
// client that falls back to TCP on its own when a UDP reply is truncated.
// It records the networks it dialled.
func goResolver(addr netip.AddrPort) (*net.Resolver, func() []string) {
	var mu sync.Mutex
	var dialled []string
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, network)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr.String())
	}}
	return r, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), dialled...)
	}
}

func TestGoResolverResolvesServices(t *testing.T) {
	for _, limit := range []uint16{0, 64} {
		s := startServer(t, service.Config{MaxUDPPayload: limit})
		if err := s.Update(services([2]string{"product", "database"})); err != nil {
			t.Fatal(err)
		}
		r, dialled := goResolver(s.Addr())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ips, err := r.LookupNetIP(ctx, "ip6", "database.product.svc.cluster.local.")
		cancel()
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if len(ips) != 1 || ips[0] != vip.For(cluster, "product", "database") {
			t.Errorf("limit %d: %v", limit, ips)
		}
		usedTCP := false
		for _, n := range dialled() {
			usedTCP = usedTCP || n == "tcp"
		}
		if usedTCP != (limit != 0) {
			t.Errorf("limit %d: the resolver dialled %v", limit, dialled())
		}

		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		_, err = r.LookupNetIP(ctx, "ip6", "cache.product.svc.cluster.local.")
		cancel()
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("limit %d: unknown Service: %v, want not found", limit, err)
		}
	}
}

// TestInputCarriesIdentityOnly guards the rule that readiness never
// changes DNS: the server's input has no field a backend or readiness
// change could set.
func TestInputCarriesIdentityOnly(t *testing.T) {
	typ := reflect.TypeFor[service.Service]()
	var fields []string
	for f := range typ.Fields() {
		fields = append(fields, f.Name)
	}
	if !reflect.DeepEqual(fields, []string{"Namespace", "Name", "VIP"}) {
		t.Errorf("service.Service has fields %v; DNS input must stay Namespace, Name, VIP", fields)
	}
}
