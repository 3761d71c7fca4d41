// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"fmt"
	"net/netip"

	"podmin.dev/podmin/internal/ids"
)

// Config is the agent's whole configuration: exactly the six flags the
// specification allows.
type Config struct {
	Provider   string
	Bucket     string
	Region     string
	Cluster    string
	NodeGroup  string
	IPv6Prefix netip.Prefix
}

// Providers the agent can read a cluster bucket from.
var agentProviders = map[string]bool{"aws": true, "local": true}

// ParsePrefix accepts only a canonical global-unicast IPv6 /80, the Pod
// prefix AWS delegates to the VM's secondary ENI.
func ParsePrefix(s string) (netip.Prefix, error) {
	const want = "pass the canonical /80 delegated to the secondary ENI, e.g. 2600:1f14:abc:de00:1234::/80"
	if s == "" {
		return netip.Prefix{}, fmt.Errorf("--ipv6-prefix is required: %s", want)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("--ipv6-prefix %q is not an IP prefix: %s", s, want)
	}
	a := p.Addr()
	switch {
	case !a.Is6() || a.Is4In6():
		return netip.Prefix{}, fmt.Errorf("--ipv6-prefix %q is not IPv6: %s", s, want)
	case p.Bits() != 80:
		return netip.Prefix{}, fmt.Errorf("--ipv6-prefix %q is a /%d, not a /80: %s", s, p.Bits(), want)
	case !a.IsGlobalUnicast() || a.IsPrivate():
		return netip.Prefix{}, fmt.Errorf("--ipv6-prefix %q is not global unicast: %s", s, want)
	case p.Masked() != p || p.String() != s:
		return netip.Prefix{}, fmt.Errorf("--ipv6-prefix %q is not canonical (want %s): %s", s, p.Masked(), want)
	}
	return p, nil
}

// Validate checks every field and joins all problems into one error so an
// operator fixes a unit file in one pass.
func (c Config) Validate() error {
	var errs []error
	if !agentProviders[c.Provider] {
		errs = append(errs, fmt.Errorf("--provider %q is not supported: use aws or local", c.Provider))
	}
	if c.Bucket == "" {
		errs = append(errs, errors.New("--bucket is required: the cluster's object storage bucket"))
	}
	switch {
	case c.Region == "":
		errs = append(errs, errors.New("--region is required: the bucket's region (local for the local provider)"))
	case c.Provider == "local" && c.Region != "local":
		errs = append(errs, fmt.Errorf("--region %q is not a region of the local provider: use --region local", c.Region))
	}
	if err := ids.ValidateCluster(c.Cluster); err != nil {
		errs = append(errs, fmt.Errorf("--cluster: %w", err))
	}
	if err := ids.ValidateNodeGroup(c.NodeGroup); err != nil {
		errs = append(errs, fmt.Errorf("--nodegroup: %w", err))
	}
	if !c.IPv6Prefix.IsValid() {
		errs = append(errs, errors.New("--ipv6-prefix is required: parse it with ParsePrefix"))
	}
	return errors.Join(errs...)
}
