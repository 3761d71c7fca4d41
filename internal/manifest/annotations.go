// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"slices"
	"strings"

	"podmin.dev/podmin/internal/scrub"
)

const (
	// NodeGroupSelector is the only node selector key a DaemonSet template
	// may use; Extract removes it from the emitted Pod.
	NodeGroupSelector = "podmin.dev/nodegroup"
	// ServiceAnnotation names the inline Service on the emitted Pod. It is
	// an annotation, not a label: it is Podmin's instruction to the agent
	// (issue server certificates for this Service) like the other
	// podmin.dev/ annotations, and as a label it would leak into the user's
	// label space where Service selectors could match it.
	ServiceAnnotation = "podmin.dev/service"
	// podminPrefix marks annotations that carry instructions to Podmin.
	podminPrefix = "podmin.dev/"
)

// SecretsProviders lists the providers whose Pod annotation
// podmin.dev/<provider> mounts values: a comma-separated list of keys. The
// local provider keeps values in a store on the operator's machine for
// clusters that run on the embedded local provider.
func SecretsProviders() []string {
	return []string{"aws-parameter-store", "aws-secrets-manager", "local"}
}

// reservedAnnotations are set by Podmin; a manifest that set them could
// claim a Service identity it does not own or forge a revision.
func reservedAnnotations() []string {
	return []string{ServiceAnnotation, MaxUnavailableAnnotation, MaxSurgeAnnotation, "podmin.dev/revision", "podmin.dev/identity-revision"}
}

// ParseSecretKeys splits the value of a podmin.dev/<provider> annotation.
// Each key becomes one file name and one secret path component, so it must
// be a safe single path component: letters, digits, '.', '_' or '-', not
// "." or "..". Keys are separated by commas without spaces, and each key
// appears once.
func ParseSecretKeys(value string) ([]string, error) {
	if value == "" {
		return nil, fmt.Errorf("no keys: list them separated by commas, e.g. database-url,log-level")
	}
	keys := strings.Split(value, ",")
	for i, k := range keys {
		if err := checkSecretKey(k); err != nil {
			return nil, err
		}
		if slices.Contains(keys[:i], k) {
			return nil, fmt.Errorf("key %s is listed twice; list each key once", scrub.Quote(k))
		}
	}
	return keys, nil
}

func checkSecretKey(k string) error {
	if !safeSecretKey(k) {
		return fmt.Errorf("%s is not a safe key: use 1 to 255 letters, digits, '.', '_' or '-' (not \".\" or \"..\"), separated by commas without spaces", scrub.Quote(k))
	}
	return nil
}

// checkPodminAnnotations validates the podmin.dev/ annotations of a Pod
// template; a typo in one would otherwise silently mount nothing.
func checkPodminAnnotations(p *problems, path string, annotations map[string]string) {
	for _, k := range sortedKeys(annotations) {
		provider, ok := strings.CutPrefix(k, podminPrefix)
		if !ok {
			continue
		}
		field := keyPath(path, k)
		switch {
		case slices.Contains(reservedAnnotations(), k):
			p.add(subjectDaemonSet, field, "is reserved: Podmin sets it; remove it")
		case slices.Contains(SecretsProviders(), provider):
			if _, err := ParseSecretKeys(annotations[k]); err != nil {
				p.add(subjectDaemonSet, field, "%v", err)
			}
		default:
			p.add(subjectDaemonSet, field, "unknown Podmin annotation: use podmin.dev/%s", strings.Join(SecretsProviders(), " or podmin.dev/"))
		}
	}
}

// safeSecretKey reports whether k is 1 to 255 letters, digits, '.', '_' or
// '-' and not "." or "..". (A regular expression with {1,255} compiles to
// 255 copies of its class, which every process paid for at start.)
func safeSecretKey(k string) bool {
	if len(k) == 0 || len(k) > 255 || k == "." || k == ".." {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
