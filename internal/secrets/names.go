// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/scrub"
)

// SystemNamespace holds Podmin's own keys at /<cluster>/_system/<key>. It is
// not a Kubernetes namespace and can never be addressed as one.
const SystemNamespace = manifest.ReservedNamespace

// System keys. OtelLogsHeaders is the only one an operator manages (with
// --system); the others belong to setup and the agents and are neither
// addressable from the CLI nor listed.
const (
	OtelLogsHeaders = "otel-logs-headers"
	WorkloadCAKey   = "workload-ca-key"
	ClusterCA       = "cluster-ca"
)

// UserSystemKeys lists the system keys an operator may manage.
func UserSystemKeys() []string { return []string{OtelLogsHeaders} }

// InternalSystemKeys lists the system keys only Podmin itself may use.
func InternalSystemKeys() []string { return []string{ClusterCA, WorkloadCAKey} }

// Name is a validated secret name. Only the constructors in this package
// make one, so a store never sees an unchecked path.
type Name struct {
	cluster, namespace, pod, key string
}

// PodSecret names the secret KEY of a Pod: /<cluster>/<namespace>/<pod>/<key>.
// An empty namespace means "default".
func PodSecret(cluster, namespace, pod, key string) (Name, error) {
	if namespace == "" {
		namespace = manifest.DefaultNamespace
	}
	if err := checkCluster(cluster); err != nil {
		return Name{}, err
	}
	if err := checkNamespace(namespace); err != nil {
		return Name{}, err
	}
	if err := checkLabel("Pod name", pod, "pass --for with the Pod's (DaemonSet's) name"); err != nil {
		return Name{}, err
	}
	if err := CheckKey(key); err != nil {
		return Name{}, err
	}
	return Name{cluster: cluster, namespace: namespace, pod: pod, key: key}, nil
}

// SystemSecret names an operator-managed system key,
// /<cluster>/_system/<key>; only UserSystemKeys are accepted.
func SystemSecret(cluster, key string) (Name, error) {
	if err := checkCluster(cluster); err != nil {
		return Name{}, err
	}
	if !slices.Contains(UserSystemKeys(), key) {
		return Name{}, fmt.Errorf("%w: %s is not a system key you can manage: --system addresses only %q", ErrInvalid, scrub.Quote(key), UserSystemKeys())
	}
	return Name{cluster: cluster, namespace: SystemNamespace, key: key}, nil
}

// InternalSecret names one of Podmin's own system keys for setup, destroy
// and the agents. The CLI's secret commands never call it.
func InternalSecret(cluster, key string) (Name, error) {
	if err := checkCluster(cluster); err != nil {
		return Name{}, err
	}
	if !slices.Contains(InternalSystemKeys(), key) {
		return Name{}, fmt.Errorf("%w: %s is not an internal system key: use one of %q", ErrInvalid, scrub.Quote(key), InternalSystemKeys())
	}
	return Name{cluster: cluster, namespace: SystemNamespace, key: key}, nil
}

// ParseName parses a full name as a provider lists it. Names that Podmin
// would not create (other shapes, unknown system keys) are rejected.
func ParseName(path string) (Name, error) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case !strings.HasPrefix(path, "/"):
	case len(parts) == 3 && parts[1] == SystemNamespace:
		if n, err := SystemSecret(parts[0], parts[2]); err == nil {
			return n, nil
		}
		return InternalSecret(parts[0], parts[2])
	case len(parts) == 4:
		return PodSecret(parts[0], parts[1], parts[2], parts[3])
	}
	return Name{}, fmt.Errorf("%w: %s is not a Podmin secret name: names are /<cluster>/<namespace>/<pod>/<key> or /<cluster>/_system/<key>", ErrInvalid, scrub.Quote(path))
}

// String returns the provider name, e.g. /demo/default/web/db-password.
func (n Name) String() string {
	if n.namespace == SystemNamespace {
		return "/" + n.cluster + "/" + SystemNamespace + "/" + n.key
	}
	return "/" + n.cluster + "/" + n.namespace + "/" + n.pod + "/" + n.key
}

// IsZero reports whether n was not made by a constructor.
func (n Name) IsZero() bool { return n == Name{} }

// Cluster returns the cluster ID.
func (n Name) Cluster() string { return n.cluster }

// Namespace returns the namespace; SystemNamespace for a system key.
func (n Name) Namespace() string { return n.namespace }

// Pod returns the Pod name; empty for a system key.
func (n Name) Pod() string { return n.pod }

// Key returns the last path component.
func (n Name) Key() string { return n.key }

// System reports whether n is an operator-managed system key.
func (n Name) System() bool {
	return n.namespace == SystemNamespace && slices.Contains(UserSystemKeys(), n.key)
}

// Internal reports whether n is one of Podmin's own system keys.
func (n Name) Internal() bool {
	return n.namespace == SystemNamespace && !n.System()
}

// Entry returns the listing entry of n without provider metadata.
func (n Name) Entry(provider string) Entry {
	e := Entry{Name: n.String(), Key: n.key, Provider: provider, System: n.System()}
	if !e.System {
		e.Namespace, e.Pod = n.namespace, n.pod
	}
	return e
}

// CheckKey validates one key with the same rules as the podmin.dev/<provider>
// Pod annotations, so every key that can be stored can also be mounted.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: no key given: name the secret's KEY (letters, digits, '.', '_' or '-')", ErrInvalid)
	}
	keys, err := manifest.ParseSecretKeys(key)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(keys) != 1 {
		return fmt.Errorf("%w: %s is not a safe key: a key is one name without commas; create each key separately", ErrInvalid, scrub.Quote(key))
	}
	return nil
}

// CheckFilter validates a listing filter for cluster before any provider
// call.
func CheckFilter(cluster string, f Filter) error {
	if err := checkCluster(cluster); err != nil {
		return err
	}
	if f.System {
		if f.Namespace != "" || f.Pod != "" {
			return fmt.Errorf("%w: system keys belong to no namespace or Pod: omit --for and --namespace with --system", ErrInvalid)
		}
		return nil
	}
	if f.Namespace != "" {
		if err := checkNamespace(f.Namespace); err != nil {
			return err
		}
	}
	if f.Pod != "" {
		if f.Namespace == "" {
			return fmt.Errorf("%w: a Pod filter needs its namespace", ErrInvalid)
		}
		return checkLabel("Pod name", f.Pod, "pass --for with the Pod's (DaemonSet's) name")
	}
	return nil
}

// Prefix returns the name prefix that holds every secret f can match.
func (f Filter) Prefix(cluster string) string {
	switch {
	case f.System:
		return "/" + cluster + "/" + SystemNamespace + "/"
	case f.Pod != "":
		return "/" + cluster + "/" + f.Namespace + "/" + f.Pod + "/"
	case f.Namespace != "":
		return "/" + cluster + "/" + f.Namespace + "/"
	}
	return "/" + cluster + "/"
}

// Visible parses a listed name and reports whether a listing with f shows
// it. Internal system keys and names Podmin would not create are hidden.
func (f Filter) Visible(cluster, path string) (Name, bool) {
	n, err := ParseName(path)
	if err != nil || n.cluster != cluster || n.Internal() {
		return Name{}, false
	}
	switch {
	case f.System:
		return n, n.System()
	case f.Pod != "":
		return n, n.namespace == f.Namespace && n.pod == f.Pod
	case f.Namespace != "":
		return n, n.namespace == f.Namespace
	}
	return n, true
}

func checkCluster(cluster string) error {
	if err := ids.ValidateCluster(cluster); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func checkNamespace(ns string) error {
	if ns == SystemNamespace {
		return fmt.Errorf("%w: %s is not a namespace: it holds Podmin's system keys; address %s with --system", ErrInvalid, scrub.Quote(ns), OtelLogsHeaders)
	}
	return checkLabel("namespace", ns, "pass --namespace with the Pod's namespace")
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// checkLabel applies the DNS-1123 label rule that Pod names and namespaces
// follow in Podmin manifests.
func checkLabel(what, s, hint string) error {
	if s == "" {
		return fmt.Errorf("%w: no %s given: %s", ErrInvalid, what, hint)
	}
	if len(s) > 63 || !dnsLabelRE.MatchString(s) {
		return fmt.Errorf("%w: %s is not a valid %s: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit", ErrInvalid, scrub.Quote(s), what)
	}
	return nil
}
