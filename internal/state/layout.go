// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"fmt"
	"strings"
)

// Fixed object paths. Together with the functions below they are the whole
// bucket layout of the specification's "Object Storage" section.
const (
	// TFStatePath is the OpenTofu/Terraform S3 backend state.
	TFStatePath = "tfstate/podmin.tfstate"
	// TFLockPath is the backend's lock file beside the state.
	TFLockPath = "tfstate/podmin.tfstate.tflock"
	// TFVarsPath is the generated variables file setup stores with the state.
	TFVarsPath = "tfstate/podmin.auto.tfvars.json"
	// DependencyManifestPath records the dependency set published for the cluster.
	DependencyManifestPath = "dependencies/manifest.json"
	// IndexPath is deployments/index.json, the single cluster-wide commit point.
	IndexPath = "deployments/index.json"
	// DNSLeaderPath is the coordination leader record.
	DNSLeaderPath = "dns/leader.json"
	// DNSServicesPath is the published Service snapshot.
	DNSServicesPath = "dns/services.pb"
	// IdentityCAPath is the public workload CA state.
	IdentityCAPath = "identity/ca.json"
)

// Prefixes of the variable parts of the layout, for listings and IAM scopes.
const (
	// DependenciesPrefix holds the dependency manifest and the dependency files.
	DependenciesPrefix = "dependencies/"
	// AppsPrefix holds the OCI layouts of pushed application images.
	AppsPrefix = "apps/"
	// MirrorPrefix holds the OCI layouts of setup-managed upstream images.
	MirrorPrefix = "mirror/"
	// NodeGroupsPrefix holds the content-addressed Pod payloads.
	NodeGroupsPrefix = "nodegroups/"
	// ServicesPrefix holds the content-addressed Service payloads.
	ServicesPrefix = "services/"
	// NodeGroupStatusPrefix holds the observed state the coordination
	// leader publishes, one object per NodeGroup.
	NodeGroupStatusPrefix = "status/nodegroups/"
)

// NodeGroupStatusPath is status/nodegroups/<nodegroup>.json, the observed
// state of one NodeGroup (NodeGroupStatus): what each of its nodes reports
// about each deployment. Only the coordination leader writes it, and only
// when it changes, so reading a NodeGroup's status is one GET whatever the
// number of nodes.
func NodeGroupStatusPath(nodegroup string) (string, error) {
	if err := validateNodeGroup(nodegroup); err != nil {
		return "", err
	}
	return NodeGroupStatusPrefix + nodegroup + ".json", nil
}

// DependencyPath is dependencies/<name>/<file> for one versioned dependency file.
func DependencyPath(name, file string) (string, error) {
	if err := validateFileName("dependency name", name); err != nil {
		return "", err
	}
	if err := validateFileName("dependency file name", file); err != nil {
		return "", err
	}
	return DependenciesPrefix + name + "/" + file, nil
}

// ParseDependencyPath splits dependencies/<name>/<file>.
func ParseDependencyPath(p string) (name, file string, err error) {
	rest, ok := strings.CutPrefix(p, DependenciesPrefix)
	name, file, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return "", "", fmt.Errorf("%q is not a dependency path: expected %s<name>/<file>", p, DependenciesPrefix)
	}
	if _, err := DependencyPath(name, file); err != nil {
		return "", "", fmt.Errorf("%q is not a dependency path: %w", p, err)
	}
	return name, file, nil
}

// OCILayout is the root of one OCI image layout in the bucket: either
// apps/<repository> or mirror/<upstream-registry>/<repository>. Its zero
// value is not a layout; construct it with AppLayout or MirrorLayout.
type OCILayout struct {
	root string
}

// AppLayout is the layout of a pushed application repository, apps/<repository>.
// The repository may contain slashes (example/web).
func AppLayout(repository string) (OCILayout, error) {
	if err := validateRepository(repository); err != nil {
		return OCILayout{}, err
	}
	return OCILayout{root: AppsPrefix + repository}, nil
}

// MirrorLayout is the layout of a setup-managed upstream image,
// mirror/<upstream-registry>/<repository>.
func MirrorLayout(upstream, repository string) (OCILayout, error) {
	if err := validateRegistryHost(upstream); err != nil {
		return OCILayout{}, err
	}
	if err := validateRepository(repository); err != nil {
		return OCILayout{}, err
	}
	return OCILayout{root: MirrorPrefix + upstream + "/" + repository}, nil
}

// Root is the layout's directory without a trailing slash.
func (l OCILayout) Root() string { return l.root }

// LayoutFile is <root>/oci-layout.
func (l OCILayout) LayoutFile() string { return l.root + "/oci-layout" }

// IndexFile is <root>/index.json.
func (l OCILayout) IndexFile() string { return l.root + "/index.json" }

// BlobPath is <root>/blobs/sha256/<hex> for an OCI digest "sha256:<hex>".
// Only SHA-256 is accepted, because that is the only algorithm the layout
// stores.
func (l OCILayout) BlobPath(digest string) (string, error) {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return "", fmt.Errorf("invalid OCI digest %q: expected sha256:<64 lowercase hex characters>", digest)
	}
	if err := validateHex("sha256", hex, 64); err != nil {
		return "", err
	}
	return l.root + "/blobs/sha256/" + hex, nil
}

// ParseOCIBlobPath splits an apps/ or mirror/ blob path into its layout and
// OCI digest ("sha256:<hex>"), so a reader can verify the bytes it fetched.
func ParseOCIBlobPath(p string) (OCILayout, string, error) {
	const mid = "/blobs/sha256/"
	i := strings.LastIndex(p, mid)
	if i < 0 {
		return OCILayout{}, "", fmt.Errorf("%q is not an OCI blob path: expected <layout>%s<digest>", p, mid)
	}
	root, hex := p[:i], p[i+len(mid):]
	var l OCILayout
	var err error
	switch {
	case strings.HasPrefix(root, AppsPrefix):
		l, err = AppLayout(root[len(AppsPrefix):])
	case strings.HasPrefix(root, MirrorPrefix):
		upstream, repo, _ := strings.Cut(root[len(MirrorPrefix):], "/")
		l, err = MirrorLayout(upstream, repo)
	default:
		err = fmt.Errorf("it is under neither %s nor %s", AppsPrefix, MirrorPrefix)
	}
	if err == nil {
		err = validateHex("sha256", hex, 64)
	}
	if err != nil {
		return OCILayout{}, "", fmt.Errorf("%q is not an OCI blob path: %w", p, err)
	}
	return l, "sha256:" + hex, nil
}

// SHA512HexLen is the length of a hex SHA-512 digest in payload paths.
const SHA512HexLen = 128

// PodPath is nodegroups/<nodegroup>/pods/sha512/<digest>.yaml for a hex
// SHA-512 digest. Most callers want PodPayloadPath, which hashes the bytes.
func PodPath(nodegroup, digest string) (string, error) {
	if err := validateNodeGroup(nodegroup); err != nil {
		return "", err
	}
	if err := validateHex("sha512", digest, SHA512HexLen); err != nil {
		return "", err
	}
	return NodeGroupsPrefix + nodegroup + "/pods/sha512/" + digest + ".yaml", nil
}

// ParsePodPath splits a canonical Pod payload path.
func ParsePodPath(p string) (nodegroup, digest string, err error) {
	parts := strings.Split(p, "/")
	if len(parts) != 5 || parts[0]+"/" != NodeGroupsPrefix || parts[2] != "pods" || parts[3] != "sha512" ||
		!strings.HasSuffix(parts[4], ".yaml") {
		return "", "", fmt.Errorf("%q is not a Pod payload path: expected %s<nodegroup>/pods/sha512/<digest>.yaml", p, NodeGroupsPrefix)
	}
	nodegroup, digest = parts[1], strings.TrimSuffix(parts[4], ".yaml")
	if _, err := PodPath(nodegroup, digest); err != nil {
		return "", "", fmt.Errorf("%q is not a Pod payload path: %w", p, err)
	}
	return nodegroup, digest, nil
}

// ServicePath is services/<namespace>/<service>/sha512/<digest>.yaml for a
// hex SHA-512 digest. Most callers want ServicePayloadPath.
func ServicePath(namespace, service, digest string) (string, error) {
	if err := validateNamespace(namespace); err != nil {
		return "", err
	}
	if err := validateServiceName(service); err != nil {
		return "", err
	}
	if err := validateHex("sha512", digest, SHA512HexLen); err != nil {
		return "", err
	}
	return ServicesPrefix + namespace + "/" + service + "/sha512/" + digest + ".yaml", nil
}

// ParseServicePath splits a canonical Service payload path. The namespace
// and name are the Service identity the index entry owns.
func ParseServicePath(p string) (id ServiceID, digest string, err error) {
	parts := strings.Split(p, "/")
	if len(parts) != 5 || parts[0]+"/" != ServicesPrefix || parts[3] != "sha512" || !strings.HasSuffix(parts[4], ".yaml") {
		return ServiceID{}, "", fmt.Errorf("%q is not a Service payload path: expected %s<namespace>/<service>/sha512/<digest>.yaml", p, ServicesPrefix)
	}
	id, digest = ServiceID{Namespace: parts[1], Name: parts[2]}, strings.TrimSuffix(parts[4], ".yaml")
	if _, err := ServicePath(id.Namespace, id.Name, digest); err != nil {
		return ServiceID{}, "", fmt.Errorf("%q is not a Service payload path: %w", p, err)
	}
	return id, digest, nil
}
