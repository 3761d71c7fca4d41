// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"testing"
	"time"
)

// TestPlanRotationRules walks one CA life with exact instants: each rule
// fires at its boundary and not one second before.
func TestPlanRotationRules(t *testing.T) {
	key := workloadKey(t)
	newCA := func(now time.Time) func() (*x509.Certificate, error) {
		return func() (*x509.Certificate, error) { return NewCA(rand.Reader, key, WorkloadCASpec("demo"), now) }
	}
	plan := func(cur *CAState, now time.Time, external, observed bool) RotationPlan {
		t.Helper()
		p, err := PlanRotation(RotationInput{Current: cur, Now: now, External: external, Observed: observed, NewCA: newCA(now)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := plan(nil, t0, false, false)
	if !p.Write || p.Next.Active == nil || p.Next.Pending != nil {
		t.Fatalf("first: %+v", p)
	}
	s := p.Next
	if got := s.Active.NotAfter.Sub(t0); got != WorkloadCALifetime {
		t.Fatalf("CA lifetime %s", got)
	}
	rotateAt := s.Active.NotAfter.Add(-RotateBefore)
	if p := plan(&s, rotateAt.Add(-time.Second), false, false); p.Write {
		t.Fatalf("rotated a second early: %s", p.Reason)
	}
	p = plan(&s, rotateAt, false, false)
	if !p.Write || p.Next.Pending == nil || !p.Next.PendingSince.Equal(rotateAt) || len(p.Next.Certs()) != 2 {
		t.Fatalf("pending: %+v", p)
	}
	s = p.Next
	before := s.BundlePEM()
	if p := plan(&s, rotateAt.Add(Propagation-time.Second), false, false); p.Write {
		t.Fatalf("promoted a second early: %s", p.Reason)
	}
	promoteAt := rotateAt.Add(Propagation)
	p = plan(&s, promoteAt, false, false)
	if !p.Write || !p.Next.Active.Equal(s.Pending) || !p.Next.Retired.Equal(s.Active) || p.Next.Pending != nil {
		t.Fatalf("promotion: %+v", p)
	}
	if !bytes.Equal(p.Next.BundlePEM(), before) {
		t.Fatal("promotion changed the bundle bytes")
	}
	s = p.Next
	dropAt := promoteAt.Add(RetainRetired)
	if p := plan(&s, dropAt.Add(-time.Second), false, false); p.Write {
		t.Fatalf("dropped a second early: %s", p.Reason)
	}
	p = plan(&s, dropAt, false, false)
	if !p.Write || p.Next.Retired != nil || len(p.Next.Certs()) != 1 {
		t.Fatalf("drop: %+v", p)
	}
	// The encoded state round-trips.
	data, err := p.Next.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCAState(data, key)
	if err != nil || !back.Active.Equal(p.Next.Active) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestPlanRotationExternalAndRecovery(t *testing.T) {
	key := workloadKey(t)
	first, _ := NewCA(rand.Reader, key, WorkloadCASpec("demo"), t0)
	s := CAState{Active: first}
	rotateAt := first.NotAfter.Add(-RotateBefore)
	in := func(cur CAState, now time.Time, observed bool) RotationPlan {
		t.Helper()
		p, err := PlanRotation(RotationInput{Current: &cur, Now: now, External: true, Observed: observed,
			NewCA: func() (*x509.Certificate, error) { return NewCA(rand.Reader, key, WorkloadCASpec("demo"), now) }})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := in(s, rotateAt, true)
	if !p.Write || p.Next.Pending == nil || !p.Next.PendingSince.IsZero() {
		t.Fatalf("external pending must wait for observation: %+v", p)
	}
	s = p.Next
	if p := in(s, rotateAt.Add(time.Hour), false); p.Write {
		t.Fatal("delay started without observation")
	}
	obsAt := rotateAt.Add(time.Hour)
	p = in(s, obsAt, true)
	if !p.Next.PendingSince.Equal(obsAt) {
		t.Fatalf("delay not started at observation: %+v", p)
	}
	s = p.Next
	if p := in(s, obsAt.Add(Propagation), false); p.Next.Retired != nil || !p.Next.PendingSince.IsZero() {
		t.Fatal("promoted without the recheck")
	}
	// Recovery: the active CA expired with a valid pending one: promote it
	// at once, external publication first.
	p = in(s, first.NotAfter, false)
	if !p.Write || !p.PublishFirst || !p.Next.Active.Equal(s.Pending) || !p.Next.Retired.Equal(first) {
		t.Fatalf("recovery with pending: %+v", p)
	}
	// Recovery without pending: a new CA valid now.
	now := first.NotAfter.Add(90 * 24 * time.Hour)
	p = in(CAState{Active: first}, now, false)
	if !p.Write || p.Next.Active.Equal(first) || now.Before(p.Next.Active.NotBefore) || len(p.Next.Certs()) != 2 {
		t.Fatalf("recovery without pending: %+v", p)
	}
}

func FuzzParseCAState(f *testing.F) {
	key := workloadKey(f)
	ca, _ := NewCA(rand.Reader, key, WorkloadCASpec("demo"), t0)
	good, _ := CAState{Active: ca}.Marshal()
	f.Add(good)
	f.Add([]byte(`{"version":1,"active":""}`))
	f.Add([]byte(`{"version":1,"active":"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseCAState(data, key)
		if err != nil {
			return
		}
		// Whatever parses holds only certificates of key, at most two.
		if len(s.Certs()) > 2 {
			t.Fatalf("%d certificates", len(s.Certs()))
		}
		for _, c := range s.Certs() {
			if err := CheckCA(c, key); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzParseWorkloadKey(f *testing.F) {
	f.Add([]byte("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="))
	f.Add([]byte("AAAA"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseWorkloadKey(data)
		if err == nil && len(k) != 64 {
			t.Fatalf("key of %d bytes", len(k))
		}
	})
}

func FuzzParseClusterCA(f *testing.F) {
	v, _ := GenerateClusterCA(rand.Reader, "demo", t0)
	f.Add(v)
	f.Fuzz(func(t *testing.T, data []byte) {
		ca, err := ParseClusterCA(data, "demo")
		if err == nil {
			if err := CheckCA(ca.Cert, ca.Key); err != nil {
				t.Fatal(err)
			}
		}
	})
}
