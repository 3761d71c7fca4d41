// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
)

// ErrInvalid reports key or certificate material that fails a check. The
// wrapping message says which check and never contains key bytes.
var ErrInvalid = errors.New("invalid PKI material")

// GenerateWorkloadKey returns a new workload CA key secret value: the
// standard base64 encoding of 32 random bytes, the Ed25519 seed. Text keeps
// it storable by every secrets provider, Parameter Store included.
func GenerateWorkloadKey(random io.Reader) ([]byte, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(random, seed); err != nil {
		return nil, fmt.Errorf("generate workload CA key: %w", err)
	}
	return []byte(base64.StdEncoding.EncodeToString(seed)), nil
}

// ParseWorkloadKey decodes a workload CA key secret value into the Ed25519
// private key. Surrounding whitespace is ignored; anything that is not the
// base64 of exactly 32 bytes is rejected.
func ParseWorkloadKey(value []byte) (ed25519.PrivateKey, error) {
	s := bytes.TrimSpace(value)
	seed := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(seed, s)
	if err != nil {
		return nil, fmt.Errorf("%w: the workload CA key is not base64: it must be the base64 of a 32-byte Ed25519 seed", ErrInvalid)
	}
	if n != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: the workload CA key is %d bytes, not %d: it must be the base64 of a 32-byte Ed25519 seed", ErrInvalid, n, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed[:n]), nil
}

// GenerateKey returns a new Ed25519 key pair.
func GenerateKey(random io.Reader) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(random)
	if err != nil {
		return nil, fmt.Errorf("generate Ed25519 key: %w", err)
	}
	return priv, nil
}

// EncodeKeyPEM encodes an Ed25519 private key as unencrypted PKCS#8 PEM
// ("PRIVATE KEY"), the form Go, OpenSSL, Traefik and PostgreSQL all read.
func EncodeKeyPEM(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKeyPEM decodes one PKCS#8 PEM Ed25519 private key.
func ParseKeyPEM(data []byte) (ed25519.PrivateKey, error) {
	b, rest := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: no PKCS#8 \"PRIVATE KEY\" PEM block", ErrInvalid)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: data after the private key PEM block", ErrInvalid)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: the private key is not PKCS#8", ErrInvalid)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: the private key is %T, not Ed25519", ErrInvalid, k)
	}
	return ek, nil
}

// EncodeCertPEM encodes one DER certificate as PEM.
func EncodeCertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EncodeBundlePEM concatenates the PEM encodings of certs in order.
func EncodeBundlePEM(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		buf.Write(EncodeCertPEM(c.Raw))
	}
	return buf.Bytes()
}

// ParseCertsPEM decodes every CERTIFICATE block of data. It fails on any
// other block, on trailing garbage and on an empty input.
func ParseCertsPEM(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: PEM block %q where a CERTIFICATE was expected", ErrInvalid, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d does not parse: %v", ErrInvalid, len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	switch {
	case len(bytes.TrimSpace(rest)) != 0:
		return nil, fmt.Errorf("%w: data after certificate %d is not PEM", ErrInvalid, len(certs))
	case len(certs) == 0:
		return nil, fmt.Errorf("%w: no CERTIFICATE PEM block", ErrInvalid)
	}
	return certs, nil
}

// Fingerprint is the lowercase hex SHA-256 of a certificate's DER bytes.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// KeyMatches reports whether pub is the public half of key.
func KeyMatches(pub any, key ed25519.PrivateKey) bool {
	p, ok := pub.(ed25519.PublicKey)
	return ok && p.Equal(key.Public())
}
