// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// clusterCAVersion is the version of the cluster CA secret document.
const clusterCAVersion = 1

// ClusterCA is the cluster coordination CA: a long-lived self-signed
// certificate and its private key, read by every node to self-issue its
// mTLS identity.
type ClusterCA struct {
	Cert *x509.Certificate
	Key  ed25519.PrivateKey
}

// clusterCADoc is the secret value stored at /<cluster>/_system/cluster-ca.
type clusterCADoc struct {
	Version     int    `json:"version"`
	Cluster     string `json:"cluster"`
	Certificate string `json:"certificate"`
	PrivateKey  string `json:"privateKey"`
}

// GenerateClusterCA makes a new cluster CA for cluster and returns the
// secret value to store: JSON with the certificate PEM and the PKCS#8
// private key PEM.
func GenerateClusterCA(random io.Reader, cluster string, now time.Time) ([]byte, error) {
	key, err := GenerateKey(random)
	if err != nil {
		return nil, err
	}
	cert, err := NewCA(random, key, CASpec{CommonName: "Podmin cluster CA", Organization: cluster, Lifetime: ClusterCALifetime}, now)
	if err != nil {
		return nil, err
	}
	keyPEM, err := EncodeKeyPEM(key)
	if err != nil {
		return nil, err
	}
	return json.Marshal(clusterCADoc{Version: clusterCAVersion, Cluster: cluster, Certificate: string(EncodeCertPEM(cert.Raw)), PrivateKey: string(keyPEM)})
}

// ParseClusterCA decodes and checks a cluster CA secret value of cluster:
// the certificate must be a CA made from the stored key. Validity is the
// caller's check, against its own clock.
func ParseClusterCA(value []byte, cluster string) (ClusterCA, error) {
	var doc clusterCADoc
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return ClusterCA{}, fmt.Errorf("%w: the cluster CA secret is not a cluster CA document (JSON)", ErrInvalid)
	}
	switch {
	case doc.Version != clusterCAVersion:
		return ClusterCA{}, fmt.Errorf("%w: cluster CA secret version %d is not supported: upgrade podmin", ErrInvalid, doc.Version)
	case doc.Cluster != cluster:
		return ClusterCA{}, fmt.Errorf("%w: the cluster CA secret belongs to cluster %q, not %q", ErrInvalid, doc.Cluster, cluster)
	}
	certs, err := ParseCertsPEM([]byte(doc.Certificate))
	if err != nil {
		return ClusterCA{}, fmt.Errorf("cluster CA certificate: %w", err)
	}
	if len(certs) != 1 {
		return ClusterCA{}, fmt.Errorf("%w: the cluster CA secret holds %d certificates, want 1", ErrInvalid, len(certs))
	}
	key, err := ParseKeyPEM([]byte(doc.PrivateKey))
	if err != nil {
		return ClusterCA{}, fmt.Errorf("cluster CA key: %w", err)
	}
	if err := CheckCA(certs[0], key); err != nil {
		return ClusterCA{}, fmt.Errorf("cluster CA: %w", err)
	}
	return ClusterCA{Cert: certs[0], Key: key}, nil
}
