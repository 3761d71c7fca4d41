// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"crypto/ed25519"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"slices"
	"time"
)

// Backdate is how far before "now" certificates become valid, so a peer
// whose clock runs slightly behind still accepts a fresh certificate.
const Backdate = 5 * time.Minute

// CASpec describes a self-signed CA certificate.
type CASpec struct {
	// CommonName and Organization form the subject. Keeping them equal
	// across rotations lets a leaf chain to every certificate of its key.
	CommonName, Organization string
	// Lifetime is the validity measured from now (before Backdate).
	Lifetime time.Duration
}

// LeafSpec describes a leaf certificate: its names, usages and lifetime.
type LeafSpec struct {
	CommonName string
	URIs       []*url.URL
	DNSNames   []string
	IPs        []net.IP
	// ClientAuth and ServerAuth select the extended key usages.
	ClientAuth, ServerAuth bool
	// Lifetime is the validity measured from now; the issuing CA's expiry
	// caps it.
	Lifetime time.Duration
}

func serial(random io.Reader) (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(random, b); err != nil {
		return nil, fmt.Errorf("certificate serial number: %w", err)
	}
	b[0] &= 0x7f // positive
	b[0] |= 0x01 // never zero, always 16 bytes of DER
	return new(big.Int).SetBytes(b), nil
}

// NewCA signs a self-signed CA certificate for key, valid from now-Backdate
// to now+spec.Lifetime.
func NewCA(random io.Reader, key ed25519.PrivateKey, spec CASpec, now time.Time) (*x509.Certificate, error) {
	sn, err := serial(random)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: spec.CommonName, Organization: nonEmpty(spec.Organization)},
		NotBefore:             now.Add(-Backdate).UTC(),
		NotAfter:              now.Add(spec.Lifetime).UTC(),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(random, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign CA certificate: %w", err)
	}
	return x509.ParseCertificate(der)
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// CheckCA verifies that cert is a self-signed Ed25519 CA certificate made
// from key: the public key matches, the CA constraints and usage are set
// and the self-signature verifies. It does not check the validity period.
func CheckCA(cert *x509.Certificate, key ed25519.PrivateKey) error {
	fp := Fingerprint(cert)[:16]
	switch {
	case !KeyMatches(cert.PublicKey, key):
		return fmt.Errorf("%w: CA certificate %s (serial %x) was not made from the stored CA key", ErrInvalid, fp, cert.SerialNumber)
	case !cert.BasicConstraintsValid || !cert.IsCA:
		return fmt.Errorf("%w: certificate %s is not a CA certificate", ErrInvalid, fp)
	case cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return fmt.Errorf("%w: CA certificate %s may not sign certificates", ErrInvalid, fp)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		return fmt.Errorf("%w: CA certificate %s has no valid self-signature: %v", ErrInvalid, fp, err)
	}
	return nil
}

// Issue signs a leaf for pub with the CA certificate ca and its key. The
// CA must have been made from caKey and be valid at now.
func Issue(random io.Reader, ca *x509.Certificate, caKey ed25519.PrivateKey, pub ed25519.PublicKey, spec LeafSpec, now time.Time) (*x509.Certificate, error) {
	if err := CheckCA(ca, caKey); err != nil {
		return nil, err
	}
	if now.Before(ca.NotBefore) || !now.Before(ca.NotAfter) {
		return nil, fmt.Errorf("%w: CA certificate %s is not valid at %s (valid %s to %s)", ErrInvalid,
			Fingerprint(ca)[:16], now.UTC().Format(time.RFC3339), ca.NotBefore.Format(time.RFC3339), ca.NotAfter.Format(time.RFC3339))
	}
	if !spec.ClientAuth && !spec.ServerAuth {
		return nil, fmt.Errorf("%w: a leaf needs client or server authentication", ErrInvalid)
	}
	sn, err := serial(random)
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(spec.Lifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: spec.CommonName},
		NotBefore:             now.Add(-Backdate).UTC(),
		NotAfter:              notAfter.UTC(),
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           spec.extKeyUsage(),
		URIs:                  spec.URIs,
		DNSNames:              spec.DNSNames,
		IPAddresses:           spec.IPs,
	}
	der, err := x509.CreateCertificate(random, tmpl, ca, pub, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign leaf %q: %w", spec.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

func (s LeafSpec) extKeyUsage() []x509.ExtKeyUsage {
	var u []x509.ExtKeyUsage
	if s.ClientAuth {
		u = append(u, x509.ExtKeyUsageClientAuth)
	}
	if s.ServerAuth {
		u = append(u, x509.ExtKeyUsageServerAuth)
	}
	return u
}

// CheckLeaf verifies a leaf against everything spec promises: key is its
// private key, it chains to one of roots at now with the spec's usages, its
// names equal the spec's exactly and it lives no longer than spec.Lifetime
// (plus Backdate).
func CheckLeaf(leaf *x509.Certificate, key ed25519.PrivateKey, spec LeafSpec, roots []*x509.Certificate, now time.Time) error {
	fp := Fingerprint(leaf)[:16]
	if !KeyMatches(leaf.PublicKey, key) {
		return fmt.Errorf("%w: leaf %s does not match its private key", ErrInvalid, fp)
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: spec.extKeyUsage()}); err != nil {
		return fmt.Errorf("%w: leaf %s does not verify: %v", ErrInvalid, fp, err)
	}
	if got, want := leaf.ExtKeyUsage, spec.extKeyUsage(); !slices.Equal(got, want) {
		return fmt.Errorf("%w: leaf %s has extended key usages %v, want %v", ErrInvalid, fp, got, want)
	}
	if leaf.Subject.CommonName != spec.CommonName {
		return fmt.Errorf("%w: leaf %s has Common Name %q, want %q", ErrInvalid, fp, leaf.Subject.CommonName, spec.CommonName)
	}
	if !slices.Equal(leaf.DNSNames, spec.DNSNames) {
		return fmt.Errorf("%w: leaf %s has DNS names %q, want %q", ErrInvalid, fp, leaf.DNSNames, spec.DNSNames)
	}
	if !slices.EqualFunc(leaf.URIs, spec.URIs, func(a, b *url.URL) bool { return a.String() == b.String() }) {
		return fmt.Errorf("%w: leaf %s has URI names %v, want %v", ErrInvalid, fp, leaf.URIs, spec.URIs)
	}
	if !slices.EqualFunc(leaf.IPAddresses, spec.IPs, func(a, b net.IP) bool { return a.Equal(b) }) {
		return fmt.Errorf("%w: leaf %s has IP addresses %v, want %v", ErrInvalid, fp, leaf.IPAddresses, spec.IPs)
	}
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life > spec.Lifetime+Backdate {
		return fmt.Errorf("%w: leaf %s lives %s, longer than %s", ErrInvalid, fp, life, spec.Lifetime)
	}
	return nil
}
