// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"fmt"
	"strings"
)

// minPickDigest is the shortest digest prefix a pick may use.
const minPickDigest = 8

// Pick is one choice an operator makes for a rebuild, parsed from
// "<nodegroup>/<name>=<digest>" (that Pod payload for the deployment),
// "<nodegroup>/<name>=none" (leave the deployment out) or
// "service:<namespace>/<service>=<digest>" (that Service payload). A
// digest may be shortened to a unique prefix of at least 8 characters.
type Pick struct {
	// Key is the deployment a Pod pick is for.
	Key Key
	// Service is the identity a Service pick is for.
	Service ServiceID
	// IsService marks a Service pick.
	IsService bool
	// Digest is the chosen payload's SHA-512, or a prefix of it.
	Digest string
	// None leaves the deployment out.
	None bool
}

// String is the pick as the operator writes it.
func (p Pick) String() string {
	v := p.Digest
	if p.None {
		v = "none"
	}
	if p.IsService {
		return "service:" + p.Service.String() + "=" + v
	}
	return p.Key.String() + "=" + v
}

// ParsePick parses one pick (see Pick).
func ParsePick(s string) (Pick, error) {
	subject, v, ok := strings.Cut(s, "=")
	if !ok || v == "" {
		return Pick{}, fmt.Errorf("pick %q: want <nodegroup>/<name>=<digest>, <nodegroup>/<name>=none or service:<namespace>/<service>=<digest>", s)
	}
	var p Pick
	if rest, ok := strings.CutPrefix(subject, "service:"); ok {
		ns, name, _ := strings.Cut(rest, "/")
		if _, err := ServicePath(ns, name, strings.Repeat("0", SHA512HexLen)); err != nil {
			return Pick{}, fmt.Errorf("pick %q: %w", s, err)
		}
		p.IsService, p.Service = true, ServiceID{Namespace: ns, Name: name}
	} else {
		k, err := ParseKey(subject)
		if err != nil {
			return Pick{}, fmt.Errorf("pick %q: %w", s, err)
		}
		p.Key = k
	}
	if v == "none" {
		if p.IsService {
			return Pick{}, fmt.Errorf("pick %q: a Service cannot be left out on its own: leave its deployment out with <nodegroup>/<name>=none", s)
		}
		p.None = true
		return p, nil
	}
	v = strings.TrimPrefix(v, "sha512:")
	if len(v) < minPickDigest || len(v) > SHA512HexLen || validateHex("sha512", v, len(v)) != nil {
		return Pick{}, fmt.Errorf("pick %q: the digest must be %d to %d lowercase hex characters of a payload's SHA-512", s, minPickDigest, SHA512HexLen)
	}
	p.Digest = v
	return p, nil
}
