// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// caStateVersion is the version of identity/ca.json.
const caStateVersion = 1

// CAState is the public workload CA state kept in identity/ca.json. Active
// issues leaves; Pending is the published successor that workloads learn to
// trust before it issues; Retired is the predecessor kept while leaves it
// may have signed still live. Pending and Retired never coexist, so the
// bundle holds at most two certificates.
type CAState struct {
	Active *x509.Certificate
	// Pending is the next CA; PendingSince is when its propagation delay
	// began (zero while external publication is still unobserved).
	Pending      *x509.Certificate
	PendingSince time.Time
	// Retired is the previous CA, retired at RetiredAt.
	Retired   *x509.Certificate
	RetiredAt time.Time
}

// caStateDoc is identity/ca.json: each certificate is one PEM block and
// the times are RFC 3339 UTC, e.g.
//
//	{
//	  "version": 1,
//	  "active": "-----BEGIN CERTIFICATE-----\n...",
//	  "pending": "-----BEGIN CERTIFICATE-----\n...",
//	  "pendingSince": "2028-01-30T12:00:00Z"
//	}
//
// with "retired" and "retiredAt" in place of the pending pair after a
// promotion.
type caStateDoc struct {
	Version      int        `json:"version"`
	Active       string     `json:"active"`
	Pending      string     `json:"pending,omitempty"`
	PendingSince *time.Time `json:"pendingSince,omitempty"`
	Retired      string     `json:"retired,omitempty"`
	RetiredAt    *time.Time `json:"retiredAt,omitempty"`
}

// WorkloadCASpec is the subject and lifetime of every workload CA
// certificate of cluster. The subject is the same across rotations, so a
// leaf chains to any certificate of the stored key that is valid.
func WorkloadCASpec(cluster string) CASpec {
	return CASpec{CommonName: "Podmin workload CA", Organization: cluster, Lifetime: WorkloadCALifetime}
}

// Certs returns the bundle: every certificate of the state, oldest first.
// The order depends only on the set, so promotion keeps the bytes.
func (s CAState) Certs() []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range []*x509.Certificate{s.Active, s.Pending, s.Retired} {
		if c != nil {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *x509.Certificate) int {
		return cmp.Or(a.NotBefore.Compare(b.NotBefore), bytes.Compare(a.Raw, b.Raw))
	})
	return out
}

// BundlePEM is the concatenated PEM of Certs: ca.crt and the external copy.
func (s CAState) BundlePEM() []byte { return EncodeBundlePEM(s.Certs()) }

// Marshal encodes the state as identity/ca.json.
func (s CAState) Marshal() ([]byte, error) {
	if s.Active == nil {
		return nil, fmt.Errorf("%w: a workload CA state needs an active certificate", ErrInvalid)
	}
	doc := caStateDoc{Version: caStateVersion, Active: string(EncodeCertPEM(s.Active.Raw))}
	if s.Pending != nil {
		doc.Pending = string(EncodeCertPEM(s.Pending.Raw))
		if !s.PendingSince.IsZero() {
			t := s.PendingSince.UTC()
			doc.PendingSince = &t
		}
	}
	if s.Retired != nil {
		doc.Retired = string(EncodeCertPEM(s.Retired.Raw))
		t := s.RetiredAt.UTC()
		doc.RetiredAt = &t
	}
	return json.MarshalIndent(doc, "", "  ")
}

// ParseCAState decodes identity/ca.json and checks that every certificate
// in it is a CA made from key. Any problem rejects the whole document, so a
// caller keeps its last good state.
func ParseCAState(data []byte, key ed25519.PrivateKey) (CAState, error) {
	var doc caStateDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return CAState{}, fmt.Errorf("%w: identity/ca.json is not a workload CA document: %v", ErrInvalid, err)
	}
	if dec.More() {
		return CAState{}, fmt.Errorf("%w: identity/ca.json has data after its JSON document", ErrInvalid)
	}
	if doc.Version != caStateVersion {
		return CAState{}, fmt.Errorf("%w: identity/ca.json version %d is not supported: upgrade the agent", ErrInvalid, doc.Version)
	}
	one := func(field, pemText string) (*x509.Certificate, error) {
		if pemText == "" {
			return nil, nil
		}
		certs, err := ParseCertsPEM([]byte(pemText))
		if err != nil {
			return nil, fmt.Errorf("identity/ca.json %s: %w", field, err)
		}
		if len(certs) != 1 {
			return nil, fmt.Errorf("%w: identity/ca.json %s holds %d certificates, want 1", ErrInvalid, field, len(certs))
		}
		if err := CheckCA(certs[0], key); err != nil {
			return nil, fmt.Errorf("identity/ca.json %s: %w", field, err)
		}
		return certs[0], nil
	}
	var s CAState
	var err error
	if doc.Active == "" {
		return CAState{}, fmt.Errorf("%w: identity/ca.json has no active certificate", ErrInvalid)
	}
	if s.Active, err = one("active", doc.Active); err != nil {
		return CAState{}, err
	}
	if s.Pending, err = one("pending", doc.Pending); err != nil {
		return CAState{}, err
	}
	if s.Retired, err = one("retired", doc.Retired); err != nil {
		return CAState{}, err
	}
	switch {
	case s.Pending != nil && s.Retired != nil:
		return CAState{}, fmt.Errorf("%w: identity/ca.json has both a pending and a retired certificate: at most two are allowed", ErrInvalid)
	case s.Retired != nil && doc.RetiredAt == nil:
		return CAState{}, fmt.Errorf("%w: identity/ca.json has a retired certificate without retiredAt", ErrInvalid)
	case s.Pending == nil && doc.PendingSince != nil:
		return CAState{}, fmt.Errorf("%w: identity/ca.json has pendingSince without a pending certificate", ErrInvalid)
	}
	if doc.PendingSince != nil {
		s.PendingSince = *doc.PendingSince
	}
	if doc.RetiredAt != nil {
		s.RetiredAt = *doc.RetiredAt
	}
	return s, nil
}

// RotationInput is what one leader pass knows.
type RotationInput struct {
	// Current is the state read from identity/ca.json; nil when absent.
	Current *CAState
	Now     time.Time
	// External reports that an external bundle copy is configured, and
	// Observed that it was just seen to hold exactly Current's bundle.
	External, Observed bool
	// NewCA signs a fresh workload CA certificate valid from Now.
	NewCA func() (*x509.Certificate, error)
}

// RotationPlan is what the leader must do next.
type RotationPlan struct {
	// Next is the state to write when Write is set.
	Next CAState
	// Write says identity/ca.json must be replaced (compare-and-swap).
	Write bool
	// PublishFirst says the external copy must hold Next's bundle before
	// identity/ca.json is written (recovery from an expired active CA).
	PublishFirst bool
	// Reason says why, for the log.
	Reason string
}

// PlanRotation is the workload CA rotation rule: create the first CA;
// drop a retired CA 30 days after retirement; publish the next CA as
// pending 30 days before the active one expires; start the 10-minute
// propagation delay once pending is published (externally observed, when
// configured); promote after the delay (rechecking the external copy); and
// when the active CA has already expired, promote a valid pending CA or a
// new one at once.
func PlanRotation(in RotationInput) (RotationPlan, error) {
	now := in.Now
	if in.Current == nil {
		ca, err := in.NewCA()
		if err != nil {
			return RotationPlan{}, err
		}
		return RotationPlan{Next: CAState{Active: ca}, Write: true, PublishFirst: in.External, Reason: "created the first workload CA"}, nil
	}
	s := *in.Current
	var reasons []string
	changed := false
	if s.Retired != nil && !now.Before(s.RetiredAt.Add(RetainRetired)) {
		s.Retired, s.RetiredAt = nil, time.Time{}
		changed = true
		reasons = append(reasons, "dropped the retired CA after 30 days")
	}
	if !now.Before(s.Active.NotAfter) {
		next := s.Pending
		if next == nil || now.Before(next.NotBefore) || !now.Before(next.NotAfter) {
			ca, err := in.NewCA()
			if err != nil {
				return RotationPlan{}, err
			}
			next = ca
		}
		s = CAState{Active: next, Retired: s.Active, RetiredAt: now}
		return RotationPlan{Next: s, Write: true, PublishFirst: in.External, Reason: "recovered: the active CA had expired, promoted its replacement at once"}, nil
	}
	switch {
	case s.Pending != nil && s.PendingSince.IsZero():
		if !in.External || in.Observed {
			s.PendingSince = now
			changed = true
			reasons = append(reasons, "pending CA published: propagation delay started")
		}
	case s.Pending != nil && in.External && !in.Observed:
		s.PendingSince = time.Time{}
		changed = true
		reasons = append(reasons, "external bundle no longer holds the pending CA: delay restarts after republication")
	case s.Pending != nil && !now.Before(s.PendingSince.Add(Propagation)):
		s = CAState{Active: s.Pending, Retired: s.Active, RetiredAt: now}
		changed = true
		reasons = append(reasons, "promoted the pending CA")
	case s.Pending == nil && !now.Before(s.Active.NotAfter.Add(-RotateBefore)):
		ca, err := in.NewCA()
		if err != nil {
			return RotationPlan{}, err
		}
		s.Pending, s.Retired, s.RetiredAt = ca, nil, time.Time{}
		if !in.External {
			s.PendingSince = now
		}
		changed = true
		reasons = append(reasons, "published the next CA as pending")
	}
	return RotationPlan{Next: s, Write: changed, Reason: joinReasons(reasons)}, nil
}

func joinReasons(r []string) string {
	var b bytes.Buffer
	for i, s := range r {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// Issuer returns the certificate that issues leaves at now: the active
// one, when it is valid.
func (s CAState) Issuer(now time.Time) (*x509.Certificate, error) {
	if s.Active == nil || now.Before(s.Active.NotBefore) || !now.Before(s.Active.NotAfter) {
		return nil, fmt.Errorf("%w: no workload CA certificate is valid at %s: the elected leader must rotate identity/ca.json", ErrInvalid, now.UTC().Format(time.RFC3339))
	}
	return s.Active, nil
}
