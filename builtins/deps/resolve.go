// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// File is one resolved dependency file for one architecture. Version, URL,
// Path, Digest and Size are the manifest's fields.
type File struct {
	Key       string `json:"-"`
	Arch      Arch   `json:"-"`
	Canonical string `json:"-"`
	Version   string `json:"version"`
	URL       string `json:"url"`
	Path      string `json:"path"`
	// Digest is "<algorithm>:<hex>", the strongest the publisher offers.
	Digest string `json:"digest"`
	// Size is exact bytes; zero until known (a download fills it in).
	Size int64 `json:"size"`
}

// Default upstream endpoints; Resolver fields override them (tests point
// them at recorded responses).
const (
	DefaultGitHubAPI = "https://api.github.com"
)

// DefaultHosts are the download bases of DownloadHost.
var DefaultHosts = map[DownloadHost]string{
	KubernetesHost: "https://dl.k8s.io",
	GVisorHost:     "https://storage.googleapis.com/gvisor",
	FluentBitHost:  "https://packages.fluentbit.io",
	DebianHost:     "https://deb.debian.org",
}

// Sentinel errors.
var (
	// ErrNoRelease reports that no release of the pinned major exists.
	ErrNoRelease = errors.New("no matching release")
	// ErrNoDigest reports a file whose publisher provides no digest.
	ErrNoDigest = errors.New("publisher provides no digest")
	// ErrDigestMismatch reports downloaded bytes that do not match the
	// published digest.
	ErrDigestMismatch = errors.New("digest mismatch")
)

// Resolver asks upstream release APIs which files to publish.
type Resolver struct {
	// Client makes every request; nil is http.DefaultClient.
	Client *http.Client
	// GitHubAPI is the GitHub REST base URL; empty is DefaultGitHubAPI.
	GitHubAPI string
	// Hosts override DefaultHosts.
	Hosts map[DownloadHost]string
	// AgentVersion is the CLI's own version, which the published agent
	// must match ("1.4.0" or "v1.4.0").
	AgentVersion string
	// Kernels are the NAT64 AMI's initial kernel per architecture, for
	// the Jool modules.
	Kernels map[Arch]string
	// MaxPages bounds release listing pagination; zero is 10.
	MaxPages int
	// Mirror, when set, is the base URL every request goes to instead of
	// the publishers (see MirrorEnv); ParseMirror makes one from a
	// directory or URL.
	Mirror string
}

// ghRelease and ghAsset are the fields Podmin reads from GitHub's
// releases API.
type ghRelease struct {
	TagName    string    `json:"tag_name"`
	Draft      bool      `json:"draft"`
	Prerelease bool      `json:"prerelease"`
	Assets     []ghAsset `json:"assets"`
}

type ghAsset struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	URL  string `json:"browser_download_url"`
	// Digest is GitHub's own "sha256:<hex>" of the asset.
	Digest string `json:"digest"`
}

// Resolve returns dep's files for each of archs, from the greatest
// release of its pinned major.
func (r *Resolver) Resolve(ctx context.Context, dep Dependency, archs []Arch) ([]File, error) {
	var rel ghRelease
	var version string
	var err error
	switch dep.Source.Kind {
	case GitHubReleases:
		rel, version, err = r.latest(ctx, dep)
	case PodminRelease:
		rel, version, err = r.agentRelease(ctx, dep)
	case DebianPackages:
		return r.debian(ctx, dep, archs)
	default:
		return nil, fmt.Errorf("%s: the %s source is resolved by its own feature, not by Resolve", dep.Key, dep.Source.Kind)
	}
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(archs))
	for _, a := range archs {
		f, err := r.file(ctx, dep, rel, version, a)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// ResolveAll resolves every dependency in defs for archs, in order.
func (r *Resolver) ResolveAll(ctx context.Context, defs []Dependency, archs []Arch) ([]File, error) {
	var all []File
	for _, d := range defs {
		fs, err := r.Resolve(ctx, d, archs)
		if err != nil {
			return nil, err
		}
		all = append(all, fs...)
	}
	return all, nil
}

// MatchesPin reports whether semantic version v is a stable release of
// pin (a major "v2", a major.minor "v1.36", or "" for any).
func MatchesPin(v, pin string) bool {
	if !semver.IsValid(v) || semver.Prerelease(v) != "" {
		return false
	}
	switch strings.Count(pin, ".") {
	case 0:
		return pin == "" || semver.Major(v) == pin
	case 1:
		return semver.MajorMinor(v) == pin
	default:
		return semver.Compare(v, pin) == 0
	}
}

// latest lists dep's releases and picks the greatest stable version of
// its pin.
func (r *Resolver) latest(ctx context.Context, dep Dependency) (ghRelease, string, error) {
	maxPages := r.MaxPages
	if maxPages <= 0 {
		maxPages = 10
	}
	var best ghRelease
	bestV := ""
	for page := 1; page <= maxPages; page++ {
		var rels []ghRelease
		url := fmt.Sprintf("%s/repos/%s/releases?per_page=100&page=%d", r.api(), dep.Source.Repo, page)
		if err := r.getJSON(ctx, url, &rels); err != nil {
			return ghRelease{}, "", fmt.Errorf("%s: list releases: %w", dep.Key, err)
		}
		for _, rel := range rels {
			if rel.Draft || rel.Prerelease {
				continue
			}
			rest, ok := strings.CutPrefix(rel.TagName, dep.Source.TagPrefix)
			if !ok {
				continue
			}
			v := "v" + rest
			if !MatchesPin(v, dep.Pin) {
				continue
			}
			if bestV == "" || semver.Compare(v, bestV) > 0 {
				best, bestV = rel, v
			}
		}
		if len(rels) < 100 {
			break
		}
	}
	if bestV == "" {
		pin := dep.Pin
		if pin == "" {
			pin = "any version"
		}
		return ghRelease{}, "", fmt.Errorf("%s: %s has no stable release of %s: %w", dep.Key, dep.Source.Repo, pin, ErrNoRelease)
	}
	return best, strings.TrimPrefix(best.TagName, dep.Source.TagPrefix), nil
}

// agentRelease returns the release of the CLI's own version.
func (r *Resolver) agentRelease(ctx context.Context, dep Dependency) (ghRelease, string, error) {
	v := r.AgentVersion
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	if !semver.IsValid(v) {
		return ghRelease{}, "", fmt.Errorf("%s: this podmin is version %q, which has no published agent: pass --agent-source with a Podmin checkout", dep.Key, r.AgentVersion)
	}
	if r.Mirror != "" {
		return r.mirroredRelease(dep, strings.TrimPrefix(v, "v")), strings.TrimPrefix(v, "v"), nil
	}
	var rel ghRelease
	url := fmt.Sprintf("%s/repos/%s/releases/tags/%s%s", r.api(), dep.Source.Repo, dep.Source.TagPrefix, strings.TrimPrefix(v, "v"))
	if err := r.getJSON(ctx, url, &rel); err != nil {
		return ghRelease{}, "", fmt.Errorf("%s: release %s: %w", dep.Key, v, err)
	}
	return rel, strings.TrimPrefix(v, "v"), nil
}

// file builds dep's file for arch from release rel.
func (r *Resolver) file(ctx context.Context, dep Dependency, rel ghRelease, version string, a Arch) (File, error) {
	name, ok := dep.ArchNames[a]
	if !ok {
		return File{}, fmt.Errorf("%s: no build for architecture %s", dep.Key, a)
	}
	x := expander{version: version, arch: name, podarch: string(a), kernel: r.Kernels[a]}
	f := File{Key: dep.Key, Arch: a, Canonical: dep.Canonical, Version: version,
		Path: "dependencies/" + dep.Key + "/" + x.expand(dep.Object)}
	if strings.Contains(dep.Asset+dep.Object, "{kernel}") && x.kernel == "" {
		return File{}, fmt.Errorf("%s: no kernel known for %s", dep.Key, a)
	}
	if dep.Source.Host != AssetHost {
		f.URL = r.host(dep.Source.Host) + x.expand(dep.Source.Path)
		// Off-GitHub publishers always publish their sidecar: the
		// strongest one listed is required.
		alg := strongest(dep.Digest.Sidecars)
		if alg == "" {
			return File{}, fmt.Errorf("%s: %w", dep.Key, ErrNoDigest)
		}
		hexd, err := r.sidecar(ctx, f.URL+dep.Digest.Sidecars[alg], alg, "")
		if err != nil {
			return File{}, fmt.Errorf("%s %s: %w", dep.Key, a, err)
		}
		f.Digest = alg + ":" + hexd
		return f, nil
	}
	asset := x.expand(dep.Asset)
	i := slices.IndexFunc(rel.Assets, func(as ghAsset) bool { return as.Name == asset })
	if i < 0 {
		return File{}, fmt.Errorf("%s: release %s has no asset %q for %s", dep.Key, rel.TagName, asset, a)
	}
	as := rel.Assets[i]
	f.URL, f.Size = as.URL, as.Size
	d, err := r.assetDigest(ctx, dep, rel, as)
	if err != nil {
		return File{}, fmt.Errorf("%s %s %s: %w", dep.Key, version, a, err)
	}
	f.Digest = d
	return f, nil
}

// assetDigest returns the strongest digest the publisher provides for as.
// A published SHA-512 is required: failing to read it is an error, never
// a reason to settle for less.
func (r *Resolver) assetDigest(ctx context.Context, dep Dependency, rel ghRelease, as ghAsset) (string, error) {
	find := func(name string) (ghAsset, bool) {
		i := slices.IndexFunc(rel.Assets, func(x ghAsset) bool { return x.Name == name })
		if i < 0 {
			return ghAsset{}, false
		}
		return rel.Assets[i], true
	}
	type cand struct {
		alg, url, name string
	}
	var cands []cand
	for _, alg := range []string{"sha512", "sha256"} {
		if suffix, ok := dep.Digest.Sidecars[alg]; ok {
			if side, ok := find(as.Name + suffix); ok {
				cands = append(cands, cand{alg, side.URL, ""})
			}
		}
		if dep.Digest.Checksums != "" && dep.Digest.ChecksumsAlgorithm == alg {
			if sums, ok := find(dep.Digest.Checksums); ok {
				cands = append(cands, cand{alg, sums.URL, as.Name})
			}
		}
	}
	if len(cands) > 0 {
		c := cands[0]
		hexd, err := r.sidecar(ctx, c.url, c.alg, c.name)
		if err != nil {
			return "", err
		}
		return c.alg + ":" + hexd, nil
	}
	if dep.Digest.AssetDigest && as.Digest != "" {
		alg, hexd, ok := strings.Cut(as.Digest, ":")
		if ok && validHex(alg, hexd) {
			return alg + ":" + strings.ToLower(hexd), nil
		}
		return "", fmt.Errorf("asset %s: malformed digest %q", as.Name, as.Digest)
	}
	return "", fmt.Errorf("asset %s: %w", as.Name, ErrNoDigest)
}

// sidecar fetches a digest file and returns the hex digest for name (the
// first digest in the file when name is empty).
func (r *Resolver) sidecar(ctx context.Context, url, alg, name string) (string, error) {
	body, err := r.get(ctx, url, 1<<20)
	if err != nil {
		return "", fmt.Errorf("read %s digest: %w", alg, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if name != "" && (len(fields) < 2 || strings.TrimPrefix(fields[len(fields)-1], "*") != name) {
			continue
		}
		if !validHex(alg, fields[0]) {
			return "", fmt.Errorf("%s: %q is not a %s digest", url, fields[0], alg)
		}
		return strings.ToLower(fields[0]), nil
	}
	if name != "" {
		return "", fmt.Errorf("%s lists no digest for %s: %w", url, name, ErrNoDigest)
	}
	return "", fmt.Errorf("%s is empty: %w", url, ErrNoDigest)
}

// host returns the base URL of h without a trailing slash.
func (r *Resolver) host(h DownloadHost) string {
	if r.Mirror != "" {
		return r.Mirror + "/" + mirrorHosts[h]
	}
	base, ok := r.Hosts[h]
	if !ok {
		base = DefaultHosts[h]
	}
	return strings.TrimSuffix(base, "/")
}

func (r *Resolver) api() string {
	if r.Mirror != "" {
		return r.Mirror + "/api"
	}
	if r.GitHubAPI != "" {
		return strings.TrimSuffix(r.GitHubAPI, "/")
	}
	return DefaultGitHubAPI
}

func (r *Resolver) client() *http.Client {
	return withFiles(r.Client)
}

func (r *Resolver) getJSON(ctx context.Context, url string, v any) error {
	body, err := r.get(ctx, url, 64<<20)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

// get reads at most limit bytes of url.
func (r *Resolver) get(ctx context.Context, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json, */*")
	resp, err := r.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("GET %s: response larger than %d bytes", url, limit)
	}
	return body, nil
}

// strongest returns the strongest algorithm among sidecars.
func strongest(sidecars map[string]string) string {
	for _, alg := range []string{"sha512", "sha256"} {
		if _, ok := sidecars[alg]; ok {
			return alg
		}
	}
	return ""
}

// digestLen is the hex length of each supported algorithm.
var digestLen = map[string]int{"sha256": 64, "sha512": 128}

func validHex(alg, s string) bool {
	n, ok := digestLen[alg]
	if !ok || len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// expander fills the templates of a Dependency.
type expander struct {
	version, arch, podarch, kernel string
}

func (x expander) expand(t string) string {
	return strings.NewReplacer("{version}", x.version, "{arch}", x.arch, "{podarch}", x.podarch, "{kernel}", x.kernel).Replace(t)
}
