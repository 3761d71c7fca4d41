// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	_ "embed"
	"fmt"
	"net/netip"
	"regexp"
	"slices"

	"podmin.dev/podmin/builtins/deps"
)

//go:embed nat64.sh
var nat64Script string

// NAT64 is what a NAT64 instance's bootstrap needs.
type NAT64 struct {
	Cluster, Bucket, Region string
	Arch                    deps.Arch
	// Generation is the launch generation; every setup increments it.
	Generation int
	// StableENI is the data ENI carrying the private IPv4, IPv6 and EIP.
	StableENI string
	// AutoScalingGroup and LifecycleHook complete the launch.
	AutoScalingGroup, LifecycleHook string
	// Kernel is the AMI's exact initial kernel.
	Kernel string
	// Manifest records the Jool archive built for Kernel.
	Manifest *deps.Manifest
	// WorkloadSubnets are the IPv6 subnets allowed to translate.
	WorkloadSubnets []netip.Prefix
	// CheckHost is an IPv4-only HTTPS host for the translated request.
	CheckHost string
}

var (
	safeID     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,254}$`)
	safeKernel = regexp.MustCompile(`^[0-9][A-Za-z0-9.+_-]{0,63}$`)
)

// RenderNAT64 renders nat64.sh.
func RenderNAT64(n NAT64) (Rendered, error) {
	for name, v := range map[string]string{"cluster": n.Cluster, "bucket": n.Bucket, "region": n.Region, "check host": n.CheckHost} {
		if !safeName.MatchString(v) {
			return Rendered{}, fmt.Errorf("NAT64 user-data: %s %q is not a valid name", name, v)
		}
	}
	for name, v := range map[string]string{"stable ENI": n.StableENI, "Auto Scaling group": n.AutoScalingGroup, "lifecycle hook": n.LifecycleHook} {
		if !safeID.MatchString(v) {
			return Rendered{}, fmt.Errorf("NAT64 user-data: %s %q is not a valid identifier", name, v)
		}
	}
	if !safeKernel.MatchString(n.Kernel) {
		return Rendered{}, fmt.Errorf("NAT64 user-data: kernel %q is not a kernel release", n.Kernel)
	}
	if !slices.Contains(deps.Archs, n.Arch) {
		return Rendered{}, fmt.Errorf("NAT64 user-data: unsupported architecture %q", n.Arch)
	}
	if n.Generation < 1 {
		return Rendered{}, fmt.Errorf("NAT64 user-data: generation %d must be positive", n.Generation)
	}
	if len(n.WorkloadSubnets) == 0 {
		return Rendered{}, fmt.Errorf("NAT64 user-data: no workload subnets to serve")
	}
	var subnets []string
	for _, p := range n.WorkloadSubnets {
		if !p.IsValid() || !p.Addr().Is6() || p.Addr().Is4In6() || p != p.Masked() {
			return Rendered{}, fmt.Errorf("NAT64 user-data: workload subnet %v is not a canonical IPv6 prefix", p)
		}
		subnets = append(subnets, p.String())
	}
	if n.Manifest == nil {
		return Rendered{}, fmt.Errorf("no dependency manifest: run setup to publish dependencies first")
	}
	jool, ok := n.Manifest.Dependencies["jool"][n.Arch]
	if !ok {
		return Rendered{}, fmt.Errorf("the dependency manifest lacks the Jool modules for %s: run setup to publish them", n.Arch)
	}
	if !safeField.MatchString(jool.Path) || !safeField.MatchString(jool.Digest) {
		return Rendered{}, fmt.Errorf("Jool object %q has characters user-data cannot carry", jool.Path)
	}
	if name, ok := deps.ParseObjectPath(jool.Path); !ok || name.Arch != n.Arch || !containsKernel(name.Version, n.Kernel) {
		return Rendered{}, fmt.Errorf("the published Jool object %s is not built for kernel %s on %s: run setup to publish it", jool.Path, n.Kernel, n.Arch)
	}
	return render("nat64.sh", nat64Script, map[string]any{
		"Cluster": n.Cluster, "Bucket": n.Bucket, "Region": n.Region, "Arch": string(n.Arch),
		"Generation": n.Generation, "StableENI": n.StableENI, "AutoScalingGroup": n.AutoScalingGroup,
		"LifecycleHook": n.LifecycleHook, "Kernel": n.Kernel, "JoolObject": jool.Path, "JoolDigest": jool.Digest,
		"CheckHost": n.CheckHost, "WorkloadSubnets": subnets,
	})
}

// containsKernel reports whether a Jool object version ("<jool>-<kernel>")
// names kernel.
func containsKernel(version, kernel string) bool {
	return len(version) > len(kernel) && version[len(version)-len(kernel)-1:] == "-"+kernel
}
