// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"podmin.dev/podmin/internal/vip"
)

// Zone is the DNS zone the server is authoritative for.
const Zone = "svc.cluster.local."

// ClusterDomain is the cluster DNS domain Pods search.
const ClusterDomain = "cluster.local"

// TTL is the lifetime of every answer, in seconds, and the negative-caching
// time of NXDOMAIN and NODATA answers.
const TTL = 5

// Service is one namespaced Service as DNS sees it: its identity and VIP.
// It is the server's whole input; a Service snapshot feeds it by listing
// every defined Service whether or not it has ready backends.
type Service struct {
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	VIP       netip.Addr `json:"vip"`
}

// Identity returns the Service of name in namespace with the VIP the formula
// of package vip assigns it in cluster.
func Identity(cluster, namespace, name string) Service {
	return Service{Namespace: namespace, Name: name, VIP: vip.For(cluster, namespace, name)}
}

// FQDN is the Service's fully qualified name, <name>.<namespace>.svc.cluster.local.
func (s Service) FQDN() string { return s.Name + "." + s.Namespace + "." + Zone }

func (s Service) String() string { return s.Namespace + "/" + s.Name }

// table is one immutable record set. Readers load it through an atomic
// pointer and never lock; Update builds a new one and swaps it in whole.
type table struct {
	// names maps a lowercase FQDN to its VIP.
	names map[string]netip.Addr
	// namespaces holds <namespace>.svc.cluster.local. for every namespace
	// with a Service: an empty non-terminal, answered NODATA rather than
	// NXDOMAIN so resolvers do not deny the names below it.
	namespaces map[string]struct{}
	// services is the sorted input, kept for persistence.
	services []Service
	serial   uint32
}

// newTable validates services and indexes them. cluster, when set, must be
// the cluster whose VIP formula produced every VIP.
func newTable(cluster string, services []Service, serial uint32) (*table, error) {
	t := &table{names: make(map[string]netip.Addr, len(services)), namespaces: map[string]struct{}{},
		services: slices.Clone(services), serial: serial}
	slices.SortFunc(t.services, func(a, b Service) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	var errs []error
	owners := map[netip.Addr]Service{}
	for _, s := range t.services {
		if err := s.validate(cluster); err != nil {
			errs = append(errs, err)
			continue
		}
		fqdn := s.FQDN()
		if _, dup := t.names[fqdn]; dup {
			errs = append(errs, fmt.Errorf("service %s is listed twice: list each Service once", s))
			continue
		}
		if other, clash := owners[s.VIP]; clash {
			errs = append(errs, fmt.Errorf("services %s and %s share the VIP %v: rename one of them", other, s, s.VIP))
			continue
		}
		owners[s.VIP] = s
		t.names[fqdn] = s.VIP
		t.namespaces[s.Namespace+"."+Zone] = struct{}{}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

const labelHint = "use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit"

func (s Service) validate(cluster string) error {
	for _, f := range []struct{ what, v string }{{"namespace", s.Namespace}, {"name", s.Name}} {
		if len(validation.IsDNS1123Label(f.v)) > 0 {
			return fmt.Errorf("service %s: %q is not a valid %s: %s", s, f.v, f.what, labelHint)
		}
	}
	if !s.VIP.Is6() || s.VIP.Is4In6() || s.VIP.Zone() != "" || !vip.In(s.VIP) {
		return fmt.Errorf("service %s: VIP %v is not in %v: derive it with vip.For", s, s.VIP, vip.Prefix)
	}
	if cluster != "" {
		if want := vip.For(cluster, s.Namespace, s.Name); s.VIP != want {
			return fmt.Errorf("service %s: VIP %v is not the VIP %v of cluster %q: the list belongs to another cluster", s, s.VIP, want, cluster)
		}
	}
	return nil
}
