// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

// Every node dependency is a value below. Changing a pinned major, a
// release source, an architecture name or a digest source is a change of
// this file only; the resolver, the cache, publication and the user-data
// renderer read nothing else.

// Arch is a Podmin architecture name: amd64 or arm64.
type Arch string

// Supported architectures. One cluster may use both.
const (
	AMD64 Arch = "amd64"
	ARM64 Arch = "arm64"
)

// Archs lists the supported architectures in canonical order.
var Archs = []Arch{AMD64, ARM64}

// SourceKind says which upstream API lists a dependency's releases.
type SourceKind string

// Release sources.
const (
	// GitHubReleases lists <api>/repos/<repo>/releases; drafts and
	// prereleases are skipped.
	GitHubReleases SourceKind = "github-releases"
	// PodminRelease is the agent published with this CLI version; it is
	// not resolved but pinned to the CLI's own version.
	PodminRelease SourceKind = "podmin-release"
	// DebianPackages reads a Debian repository's Packages index.
	DebianPackages SourceKind = "debian-packages"
	// OCIImage is an image in a registry, mirrored beneath mirror/.
	OCIImage SourceKind = "oci-image"
)

// DownloadHost names where a file is downloaded from when it is not a
// GitHub release asset. The resolver maps each to an injectable base URL.
type DownloadHost string

// Download hosts.
const (
	// AssetHost is the release asset's own browser_download_url.
	AssetHost DownloadHost = ""
	// KubernetesHost is https://dl.k8s.io.
	KubernetesHost DownloadHost = "dl.k8s.io"
	// GVisorHost is https://storage.googleapis.com/gvisor.
	GVisorHost DownloadHost = "gvisor"
	// FluentBitHost is https://packages.fluentbit.io.
	FluentBitHost DownloadHost = "fluentbit"
	// DebianHost is https://deb.debian.org.
	DebianHost DownloadHost = "debian"
)

// Source is where releases are listed and files downloaded.
type Source struct {
	Kind SourceKind
	// Repo is owner/name for GitHubReleases and PodminRelease, the
	// registry repository for OCIImage, the package name for
	// DebianPackages.
	Repo string
	// TagPrefix is stripped from a release tag before the rest is read
	// as a semantic version ("v" for most projects).
	TagPrefix string
	// Host selects the download base; AssetHost uses the release asset.
	Host DownloadHost
	// Path is the download path below Host's base URL, a template (see
	// Expand); empty for release assets. For DebianPackages it is the
	// Packages index (".gz" is decompressed).
	Path string
	// Pool is the path below Host's base URL that a Debian package's
	// Filename is relative to.
	Pool string
}

// DigestSource says where a file's digest is published. The resolver
// takes the first algorithm the publisher provides, in the order
// sha512, sha256; when the publisher provides SHA-512 it is required.
type DigestSource struct {
	// Sidecars maps an algorithm to the suffix of a file beside the
	// download holding the hex digest ("<url>.sha512"); for
	// DebianPackages, to the Packages index field holding it.
	Sidecars map[string]string
	// Checksums is a release asset listing "<hex>  <name>" lines, with
	// the algorithm it uses.
	Checksums, ChecksumsAlgorithm string
	// AssetDigest accepts the digest GitHub computes for each release
	// asset when nothing stronger is published.
	AssetDigest bool
}

// Dependency is one node dependency.
type Dependency struct {
	// Key names the dependency in the manifest and in object paths.
	Key string
	// Pin is the pinned semantic version: a major ("v2") or, where
	// releases of one minor must match, a major.minor ("v1.36"). Empty
	// accepts every major: only date-versioned projects use it.
	Pin    string
	Source Source
	// ArchNames maps a Podmin architecture to the publisher's name.
	ArchNames map[Arch]string
	// Asset is the upstream file name, a template (see Expand).
	Asset string
	// Object is the versioned file name beneath dependencies/<Key>/.
	Object string
	// Canonical is the name on the node, in the user-data rows.
	Canonical string
	Digest    DigestSource
	// Optional dependencies are published only when their feature is on.
	Optional Feature
}

// Feature gates optional dependencies.
type Feature string

// Features.
const (
	// Always is the canonical node set.
	Always Feature = ""
	// OTelLogs is setup --otel-logs: Fluent Bit and libpq5.
	OTelLogs Feature = "otel-logs"
	// NAT64 is a NAT64 instance's Jool modules for its AMI's kernel.
	NAT64 Feature = "nat64"
)

var goArch = map[Arch]string{AMD64: "amd64", ARM64: "arm64"}

var sha512Sidecar = map[string]string{"sha512": ".sha512"}

// Definitions lists every dependency. Order is the canonical order of
// manifests, user-data rows and output.
var Definitions = []Dependency{
	{
		// The plain archive carries containerd and its shims but no
		// runc; gVisor is the only runtime.
		Key: "containerd", Pin: "v2",
		Source:    Source{Kind: GitHubReleases, Repo: "containerd/containerd", TagPrefix: "v"},
		ArchNames: goArch,
		Asset:     "containerd-{version}-linux-{arch}.tar.gz",
		Object:    "containerd-v{version}-linux-{podarch}.tar.gz",
		Canonical: "containerd.tar.gz",
		Digest:    DigestSource{Sidecars: map[string]string{"sha256": ".sha256sum"}, AssetDigest: true},
	},
	{
		// The complete archive: runsc, containerd-shim-runsc-v1 and the
		// sidecar payload. Releases are dated, so no major is pinned.
		Key: "gvisor", Pin: "",
		Source: Source{Kind: GitHubReleases, Repo: "google/gvisor", TagPrefix: "release-",
			Host: GVisorHost, Path: "/releases/release/{version}/{arch}/gvisor.tar.bz2"},
		ArchNames: map[Arch]string{AMD64: "x86_64", ARM64: "aarch64"},
		Object:    "gvisor-v{version}-linux-{podarch}.tar.bz2",
		Canonical: "gvisor.tar.bz2",
		Digest:    DigestSource{Sidecars: sha512Sidecar},
	},
	{
		Key: "cni-plugins", Pin: "v1",
		Source:    Source{Kind: GitHubReleases, Repo: "containernetworking/plugins", TagPrefix: "v"},
		ArchNames: goArch,
		Asset:     "cni-plugins-linux-{arch}-v{version}.tgz",
		Object:    "cni-plugins-v{version}-linux-{podarch}.tgz",
		Canonical: "cni-plugins.tgz",
		Digest:    DigestSource{Sidecars: map[string]string{"sha512": ".sha512", "sha256": ".sha256"}, AssetDigest: true},
	},
	{
		Key: "kubelet", Pin: "v1.36",
		Source: Source{Kind: GitHubReleases, Repo: "kubernetes/kubernetes", TagPrefix: "v",
			Host: KubernetesHost, Path: "/release/v{version}/bin/linux/{arch}/kubelet"},
		ArchNames: goArch,
		Object:    "kubelet-v{version}-linux-{podarch}",
		Canonical: "kubelet",
		Digest:    DigestSource{Sidecars: sha512Sidecar},
	},
	{
		// crictl follows kubelet's minor.
		Key: "crictl", Pin: "v1.36",
		Source:    Source{Kind: GitHubReleases, Repo: "kubernetes-sigs/cri-tools", TagPrefix: "v"},
		ArchNames: goArch,
		Asset:     "crictl-v{version}-linux-{arch}.tar.gz",
		Object:    "crictl-v{version}-linux-{podarch}.tar.gz",
		Canonical: "crictl.tar.gz",
		Digest:    DigestSource{Sidecars: map[string]string{"sha512": ".sha512", "sha256": ".sha256"}, AssetDigest: true},
	},
	{
		Key: "coredns", Pin: "v1",
		Source:    Source{Kind: GitHubReleases, Repo: "coredns/coredns", TagPrefix: "v"},
		ArchNames: goArch,
		Asset:     "coredns_{version}_linux_{arch}.tgz",
		Object:    "coredns-v{version}-linux-{podarch}.tgz",
		Canonical: "coredns.tgz",
		Digest:    DigestSource{Sidecars: map[string]string{"sha256": ".sha256"}, AssetDigest: true},
	},
	{
		// The agent published with this CLI's version; --agent-source
		// cross-compiles one from a checkout instead.
		Key:       "podmin-agent",
		Source:    Source{Kind: PodminRelease, Repo: "podplane/podmin", TagPrefix: "v"},
		ArchNames: goArch,
		Asset:     "podmin-agent-linux-{arch}",
		Object:    "podmin-agent-v{version}-linux-{podarch}",
		Canonical: "podmin-agent",
		Digest:    DigestSource{Checksums: "SHA512SUMS", ChecksumsAlgorithm: "sha512"},
	},
	{
		Key: "fluent-bit", Pin: "v5",
		Source: Source{Kind: DebianPackages, Repo: "fluent-bit", Host: FluentBitHost,
			Path: "/debian/trixie/dists/trixie/main/binary-{arch}/Packages", Pool: "/debian/trixie/"},
		ArchNames: goArch,
		Object:    "fluent-bit-v{version}-linux-{podarch}.deb",
		Canonical: "fluent-bit.deb",
		Digest:    DigestSource{Sidecars: map[string]string{"sha512": "SHA512", "sha256": "SHA256"}},
		Optional:  OTelLogs,
	},
	{
		Key: "libpq5",
		// Debian 13's current libpq5; any major.
		Source: Source{Kind: DebianPackages, Repo: "libpq5", Host: DebianHost,
			Path: "/debian/dists/trixie/main/binary-{arch}/Packages.gz", Pool: "/debian/"},
		ArchNames: goArch,
		Object:    "libpq5-v{version}-linux-{podarch}.deb",
		Canonical: "libpq5.deb",
		Digest:    DigestSource{Sidecars: map[string]string{"sha256": "SHA256"}},
		Optional:  OTelLogs,
	},
	{
		// Prebuilt Jool modules for the NAT64 AMI's exact initial kernel.
		Key: "jool", Pin: "v4",
		Source:    Source{Kind: GitHubReleases, Repo: "podplane/jool-builds", TagPrefix: "v"},
		ArchNames: goArch,
		Asset:     "jool-{version}-{kernel}.tar.gz",
		Object:    "jool-v{version}-{kernel}-linux-{podarch}.tar.gz",
		Canonical: "jool.tar.gz",
		Digest:    DigestSource{Sidecars: map[string]string{"sha256": ".sha256"}, AssetDigest: true},
		Optional:  NAT64,
	},
}

// Image is an OCI image dependency mirrored beneath mirror/.
type Image struct {
	// Key names the image in the manifest's images map.
	Key string
	// Registry and Repository locate the upstream image.
	Registry, Repository string
	// Version is the pinned tag.
	Version string
}

// Images lists the image dependencies: today the kubelet's pause image.
var Images = []Image{
	{Key: "pause", Registry: "registry.k8s.io", Repository: "pause", Version: "3.10.2"},
}

// Source returns the image's upstream reference.
func (i Image) Source() string { return i.Registry + "/" + i.Repository + ":" + i.Version }

// Path returns the image's mirror path in the bucket.
func (i Image) Path() string { return "mirror/" + i.Registry + "/" + i.Repository }
