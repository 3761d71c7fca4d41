// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

func workloadKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	v, err := GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseWorkloadKey(v)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestWorkloadKeyFormat(t *testing.T) {
	v, err := GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(string(v))
	if err != nil || len(raw) != 32 {
		t.Fatalf("value %d bytes decodes to %d bytes (%v), want 32", len(v), len(raw), err)
	}
	k, err := ParseWorkloadKey(append(v, '\n'))
	if err != nil || !k.Public().(ed25519.PublicKey).Equal(ed25519.NewKeyFromSeed(raw).Public()) {
		t.Fatalf("parse: %v", err)
	}
	for name, bad := range map[string]string{
		"short":   base64.StdEncoding.EncodeToString(make([]byte, 31)),
		"long":    base64.StdEncoding.EncodeToString(make([]byte, 64)),
		"garbage": "not base64!",
		"empty":   "",
	} {
		_, err := ParseWorkloadKey([]byte(bad))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
		if name == "short" && !strings.Contains(err.Error(), "31 bytes, not 32") {
			t.Errorf("short: message %q does not say the size", err)
		}
	}
}

func TestWorkloadLeafChainsAndChecks(t *testing.T) {
	key := workloadKey(t)
	ca, err := NewCA(rand.Reader, key, WorkloadCASpec("demo"), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCA(ca, key); err != nil {
		t.Fatal(err)
	}
	if err := CheckCA(ca, workloadKey(t)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not made from the stored CA key") {
		t.Fatalf("foreign key accepted: %v", err)
	}
	leafKey, _ := GenerateKey(rand.Reader)
	spec := WorkloadLeaf("demo", "product", "web", "frontend")
	leaf, err := Issue(rand.Reader, ca, key, leafKey.Public().(ed25519.PublicKey), spec, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckLeaf(leaf, leafKey, spec, []*x509.Certificate{ca}, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "web" || leaf.URIs[0].String() != "spiffe://demo.podmin.internal/ns/product/pod/web" {
		t.Errorf("names: %v %v", leaf.Subject, leaf.URIs)
	}
	want := []string{"frontend.product.svc.cluster.local", "frontend.product.svc", "frontend.product"}
	if strings.Join(leaf.DNSNames, ",") != strings.Join(want, ",") {
		t.Errorf("DNS names %q, want %q", leaf.DNSNames, want)
	}
	if err := leaf.VerifyHostname("frontend"); err == nil {
		t.Error("bare service name verifies")
	}
	if got := leaf.NotAfter.Sub(t0.Add(time.Hour)); got != LeafLifetime {
		t.Errorf("lifetime %s", got)
	}
	// A plain Pod gets client auth only and no DNS names.
	plain := WorkloadLeaf("demo", "default", "batch", "")
	l2, err := Issue(rand.Reader, ca, key, leafKey.Public().(ed25519.PublicKey), plain, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l2.ExtKeyUsage) != 1 || l2.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || len(l2.DNSNames) != 0 {
		t.Errorf("plain leaf usages %v names %v", l2.ExtKeyUsage, l2.DNSNames)
	}
	if err := CheckLeaf(l2, leafKey, spec, []*x509.Certificate{ca}, t0); err == nil {
		t.Error("a client-only leaf passed a service spec")
	}
	// Leaves never outlive their CA, and an expired CA issues nothing.
	late := ca.NotAfter.Add(-time.Hour)
	l3, err := Issue(rand.Reader, ca, key, leafKey.Public().(ed25519.PublicKey), plain, late)
	if err != nil || !l3.NotAfter.Equal(ca.NotAfter) {
		t.Errorf("capped leaf: %v %v", l3.NotAfter, err)
	}
	if _, err := Issue(rand.Reader, ca, key, leafKey.Public().(ed25519.PublicKey), plain, ca.NotAfter); !errors.Is(err, ErrInvalid) {
		t.Errorf("expired CA issued: %v", err)
	}
}

func TestKeyPEMRoundTrip(t *testing.T) {
	k, _ := GenerateKey(rand.Reader)
	p, err := EncodeKeyPEM(k)
	if err != nil || !strings.HasPrefix(string(p), "-----BEGIN PRIVATE KEY-----") {
		t.Fatalf("%s %v", p, err)
	}
	k2, err := ParseKeyPEM(p)
	if err != nil || !k2.Equal(k) {
		t.Fatal(err)
	}
	if _, err := ParseKeyPEM(p[:len(p)/2]); err == nil {
		t.Error("truncated key accepted")
	}
}

func TestClusterCASecret(t *testing.T) {
	v, err := GenerateClusterCA(rand.Reader, "demo", t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) > 4096 {
		t.Errorf("cluster CA value is %d bytes: too big for Parameter Store", len(v))
	}
	ca, err := ParseClusterCA(v, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.NotAfter.Before(t0.Add(10*365*24*time.Hour)) {
		t.Errorf("cluster CA %v until %s", ca.Cert.IsCA, ca.Cert.NotAfter)
	}
	if _, err := ParseClusterCA(v, "other"); err == nil || !strings.Contains(err.Error(), `belongs to cluster "demo"`) {
		t.Errorf("other cluster: %v", err)
	}
	if _, err := ParseClusterCA(v[:len(v)-10], "demo"); !errors.Is(err, ErrInvalid) {
		t.Errorf("truncated: %v", err)
	}
	leafKey, _ := GenerateKey(rand.Reader)
	addr := netip.MustParseAddr("2600:1f14:abc:de00::10")
	spec := NodeLeaf("demo", "workers", "i-0123", addr)
	leaf, err := Issue(rand.Reader, ca.Cert, ca.Key, leafKey.Public().(ed25519.PublicKey), spec, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckLeaf(leaf, leafKey, spec, []*x509.Certificate{ca.Cert}, t0); err != nil {
		t.Fatal(err)
	}
	ng, id, err := ParseNodeURI(leaf.URIs[0], "demo")
	if err != nil || ng != "workers" || id != "i-0123" {
		t.Errorf("node URI %v: %s %s %v", leaf.URIs[0], ng, id, err)
	}
	if _, _, err := ParseNodeURI(leaf.URIs[0], "other"); err == nil {
		t.Error("node URI of another cluster accepted")
	}
}

func TestParseCAStateRejects(t *testing.T) {
	key := workloadKey(t)
	ca, _ := NewCA(rand.Reader, key, WorkloadCASpec("demo"), t0)
	good, err := CAState{Active: ca}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ParseCAState(good, key); err != nil || !s.Active.Equal(ca) {
		t.Fatalf("good state: %v", err)
	}
	foreign, _ := NewCA(rand.Reader, workloadKey(t), WorkloadCASpec("demo"), t0)
	foreignDoc, _ := CAState{Active: foreign}.Marshal()
	both, _ := CAState{Active: ca, Pending: ca, Retired: ca, RetiredAt: t0}.Marshal()
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"truncated": {good[:len(good)/2], "not a workload CA document"},
		"garbage":   {[]byte("\x00\x01garbage"), "not a workload CA document"},
		"empty":     {nil, "not a workload CA document"},
		"foreign":   {foreignDoc, "not made from the stored CA key"},
		"three":     {both, "at most two"},
		"trailing":  {append(append([]byte{}, good...), []byte(`{}`)...), "data after"},
		"version":   {[]byte(`{"version":2,"active":"x"}`), "version 2"},
	} {
		_, err := ParseCAState(tc.data, key)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}
