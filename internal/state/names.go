// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"fmt"
	"strconv"
	"strings"

	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/scrub"
)

// Path components are validated with the narrowest rule the thing they name
// already obeys (Kubernetes object names, OCI repository names, DNS host
// names). None of them can contain "/", be "." or "..", or differ only by
// case, so a path always has exactly one parse.

const (
	labelRule     = "use at most 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit"
	dns1035Rule   = "use at most 63 lowercase letters, digits and hyphens, starting with a letter and ending with a letter or digit"
	subdomainRule = "use at most 253 characters of dot-separated lowercase labels of letters, digits and hyphens, each starting and ending with a letter or digit"
	repoRule      = "use slash-separated lowercase components of letters and digits joined by '.', '_', '__' or '-', at most 255 characters"
	hostRule      = "use a lowercase DNS host name with an optional :port"
	fileRule      = "use at most 255 letters, digits, '.', '_', '+' and '-', not starting with '.'"
)

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool { return isLower(c) || isDigit(c) }

// dnsLabel reports whether s is an RFC 1123 label of at most 63 characters.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// validateNamespace checks a Kubernetes namespace (RFC 1123 label).
func validateNamespace(ns string) error {
	if !dnsLabel(ns) {
		return fmt.Errorf("invalid namespace %q: %s", ns, labelRule)
	}
	return nil
}

// validateServiceName checks a Kubernetes Service name (RFC 1035 label).
func validateServiceName(name string) error {
	if !dnsLabel(name) || !isLower(name[0]) {
		return fmt.Errorf("invalid Service name %q: %s", name, dns1035Rule)
	}
	return nil
}

// validateDeploymentName checks a DaemonSet name (RFC 1123 subdomain).
func validateDeploymentName(name string) error {
	if !validDeploymentName(name) {
		return fmt.Errorf("invalid deployment name %s: %s", scrub.Quote(name), subdomainRule)
	}
	return nil
}

// validDeploymentName is the rule of validateDeploymentName without an
// error, and without allocating: the index decoder runs it for every
// entry.
func validDeploymentName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for {
		label, rest, more := strings.Cut(name, ".")
		if !dnsLabel(label) {
			return false
		}
		if !more {
			return true
		}
		name = rest
	}
}

// validateNodeGroup checks a NodeGroup ID with the same rule setup uses.
func validateNodeGroup(ng string) error { return ids.ValidateNodeGroup(ng) }

// validateRepository checks an OCI repository name as the distribution
// specification defines it: components of [a-z0-9]+ joined by one separator
// ('.', '_', '__' or any run of '-'), separated by '/'.
func validateRepository(repo string) error {
	bad := func() error { return fmt.Errorf("invalid repository %q: %s", repo, repoRule) }
	if repo == "" || len(repo) > 255 {
		return bad()
	}
	for _, comp := range strings.Split(repo, "/") {
		if !repoComponent(comp) {
			return bad()
		}
	}
	return nil
}

// repoComponent reports whether comp is alnum runs joined by single
// separators.
func repoComponent(comp string) bool {
	i := 0
	for {
		start := i
		for i < len(comp) && isAlnum(comp[i]) {
			i++
		}
		if i == start {
			return false
		}
		if i == len(comp) {
			return true
		}
		start = i
		for i < len(comp) && !isAlnum(comp[i]) {
			i++
		}
		switch sep := comp[start:i]; {
		case sep == ".", sep == "_", sep == "__", strings.Trim(sep, "-") == "":
		default:
			return false
		}
	}
}

// validateRegistryHost checks an upstream registry host such as docker.io,
// registry.k8s.io or localhost:5000.
func validateRegistryHost(host string) error {
	bad := func() error { return fmt.Errorf("invalid upstream registry %q: %s", host, hostRule) }
	name, port, hasPort := strings.Cut(host, ":")
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return bad()
		}
	}
	if name == "" || len(name) > 253 {
		return bad()
	}
	for _, label := range strings.Split(name, ".") {
		if !dnsLabel(label) {
			return bad()
		}
	}
	return nil
}

// validateFileName checks one path component naming a file, such as a
// dependency name or its versioned file name.
func validateFileName(kind, name string) error {
	ok := name != "" && len(name) <= 255 && name[0] != '.'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = isAlnum(c) || (c >= 'A' && c <= 'Z') || c == '.' || c == '_' || c == '+' || c == '-'
	}
	if !ok {
		return fmt.Errorf("invalid %s %q: %s", kind, name, fileRule)
	}
	return nil
}

// validateHex checks a lowercase hexadecimal digest of exactly n characters.
func validateHex(kind, digest string, n int) error {
	if !lowerHex(digest, n) {
		return fmt.Errorf("invalid %s digest %q: use exactly %d lowercase hexadecimal characters", kind, digest, n)
	}
	return nil
}

// isLowerHex marks the bytes of lowercase hexadecimal.
var isLowerHex = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()

// lowerHex reports whether s is exactly n lowercase hexadecimal characters.
func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLowerHex[s[i]] {
			return false
		}
	}
	return true
}
