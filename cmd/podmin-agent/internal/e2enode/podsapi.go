// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2enode

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// ListPods asks the kubelet Pods API at socket, as the agent does, for
// the node's Pods.
func ListPods(socket string) ([]*corev1.Pod, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := podsapi.NewPodsClient(conn).ListPods(ctx, &podsapi.ListPodsRequest{})
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, b := range resp.GetPods() {
		var p corev1.Pod
		if err := p.Unmarshal(b); err != nil {
			return nil, fmt.Errorf("decode a listed Pod: %w", err)
		}
		out = append(out, &p)
	}
	return out, nil
}

// Lookup asks a DNS server for name's AAAA records over UDP and returns
// them with the answer's rcode.
func Lookup(server, name string) ([]netip.Addr, int, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeAAAA)
	r, _, err := (&dns.Client{Net: "udp", Timeout: 2 * time.Second}).Exchange(m, server)
	if err != nil {
		return nil, 0, err
	}
	var out []netip.Addr
	for _, rr := range r.Answer {
		if aaaa, ok := rr.(*dns.AAAA); ok {
			a, _ := netip.AddrFromSlice(aaaa.AAAA)
			out = append(out, a)
		}
	}
	return out, r.Rcode, nil
}

// Hello is what the workload answers on /.
type Hello struct {
	Version, Pod, Kernel string
}
