// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"strings"
	"testing"
)

const (
	sha256Hex = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12"
	sha256Dig = "sha256:" + sha256Hex
)

func TestParseImageRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ImageRef
		err  string
	}{
		{in: "hello", want: ImageRef{Path: "hello"}},
		{in: "hello:v1", want: ImageRef{Path: "hello", Tag: "v1"}},
		{in: "hello:V1_rc.2-x", want: ImageRef{Path: "hello", Tag: "V1_rc.2-x"}},
		{in: "team/web:v2", want: ImageRef{Path: "team/web", Tag: "v2"}},
		{in: "a/b/c", want: ImageRef{Path: "a/b/c"}},
		{in: "my_app__x--y/web.v2", want: ImageRef{Path: "my_app__x--y/web.v2"}},
		{in: "example.com/web", want: ImageRef{Domain: "example.com", Path: "web"}},
		{in: "hello@" + sha256Dig, want: ImageRef{Path: "hello", Digest: sha256Dig}},
		{in: "hello:v1@" + sha256Dig, want: ImageRef{Path: "hello", Tag: "v1", Digest: sha256Dig}},
		{in: "registry.podmin.internal/apps/hello:v1", want: ImageRef{Domain: ClusterRegistry, Path: "apps/hello", Tag: "v1"}},
		{in: "localhost/app", want: ImageRef{Domain: "localhost", Path: "app"}},
		{in: "localhost:5000/app:v1", want: ImageRef{Domain: "localhost:5000", Path: "app", Tag: "v1"}},
		{in: "localhost:5000", want: ImageRef{Path: "localhost", Tag: "5000"}},
		{in: "[fd00::1]:5000/app:v1", want: ImageRef{Domain: "[fd00::1]:5000", Path: "app", Tag: "v1"}},
		{in: "[::1]/app", want: ImageRef{Domain: "[::1]", Path: "app"}},
		{in: "Registry.Example.COM/app", want: ImageRef{Domain: "Registry.Example.COM", Path: "app"}},
		{in: "docker.io/library/nginx:1.27@" + sha256Dig, want: ImageRef{Domain: "docker.io", Path: "library/nginx", Tag: "1.27", Digest: sha256Dig}},
		{in: "", err: "the reference is empty"},
		{in: "Hello:v1", err: `repository component "Hello" must be lowercase letters and digits separated by '.', '_', '__' or '-'`},
		{in: "team/Web", err: `repository component "Web" must be lowercase letters and digits separated by '.', '_', '__' or '-'`},
		{in: "a//b", err: `repository component "" must be lowercase letters and digits separated by '.', '_', '__' or '-'`},
		{in: "-hello", err: `repository component "-hello" must be lowercase letters and digits separated by '.', '_', '__' or '-'`},
		{in: "hello:-v1", err: `tag "-v1" must start with a letter, a digit or '_'`},
		{in: "hello:.v1", err: `tag ".v1" must start with a letter, a digit or '_'`},
		{in: "hello:", err: "hello: must specify a tag name after the colon; write [registry/]repository[:tag][@sha256:<hex>], e.g. hello:v1"},
		{in: "hello@sha256:abc", err: "invalid checksum digest length: sha256:abc; write [registry/]repository[:tag][@sha256:<hex>], e.g. hello:v1"},
		{in: "hello@md5:" + sha256Hex[:32], err: "unsupported digest algorithm: md5:" + sha256Hex[:32] + "; write [registry/]repository[:tag][@sha256:<hex>], e.g. hello:v1"},
		{in: "hello@" + strings.ToUpper(sha256Dig), err: "invalid checksum digest format: " + strings.ToUpper(sha256Dig) + "; write [registry/]repository[:tag][@sha256:<hex>], e.g. hello:v1"},
		{in: "bad_host.io:x/app", err: "registries must be valid RFC 3986 URI authorities: bad_host.io:x; write [registry/]repository[:tag][@sha256:<hex>], e.g. hello:v1"},
		{in: "https://ghcr.io/org/app", err: "a reference has no URL scheme: remove http:// or https://"},
		{in: "a@b@c", err: "a digest must contain exactly one '@' separator (e.g. registry/repository@digest) saw: a@b@c; write [registry/]repository[:tag][@sha256:<hex>], e.g. hello:v1"},
		{in: "ghcr.io/" + strings.Repeat("a", 250), err: "registry and repository are 257 characters; the limit is 255"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseImageRef(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("ParseImageRef(%q) = %+v, %v; want error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseImageRef(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			if got.String() != tc.in {
				t.Errorf("String() = %q, want %q", got.String(), tc.in)
			}
		})
	}
}

func TestResolveImage(t *testing.T) {
	const pause = "registry.podmin.internal/mirror/registry.k8s.io/pause"
	const cloudflared = "registry.podmin.internal/mirror/docker.io/cloudflare/cloudflared"
	for _, tc := range []struct {
		in, want, err string
	}{
		// Shorthand resolves beneath apps/.
		{in: "hello", want: "registry.podmin.internal/apps/hello"},
		{in: "hello:v1", want: "registry.podmin.internal/apps/hello:v1"},
		{in: "team/web:v2", want: "registry.podmin.internal/apps/team/web:v2"},
		{in: "library/nginx:1.27", want: "registry.podmin.internal/apps/library/nginx:1.27"},
		{in: "hello@" + sha256Dig, want: "registry.podmin.internal/apps/hello@" + sha256Dig},
		{in: "hello:v1@" + sha256Dig, want: "registry.podmin.internal/apps/hello:v1@" + sha256Dig},
		// Full cluster references.
		{in: "registry.podmin.internal/apps/hello:v1", want: "registry.podmin.internal/apps/hello:v1"},
		{in: "registry.podmin.internal/apps/team/web@" + sha256Dig, want: "registry.podmin.internal/apps/team/web@" + sha256Dig},
		{in: pause + ":3.10.2", want: pause + ":3.10.2"},
		{in: pause + "@" + sha256Dig, want: pause + "@" + sha256Dig},
		{in: cloudflared + ":2025.6.0@" + sha256Dig, want: cloudflared + ":2025.6.0@" + sha256Dig},
		// mirror/ beyond the platform's images.
		{in: "registry.podmin.internal/mirror/docker.io/library/nginx:1.27",
			err: `"registry.podmin.internal/mirror/docker.io/library/nginx:1.27" is not a platform image: mirror/ holds only the images Podmin manages (registry.k8s.io/pause, docker.io/cloudflare/cloudflared); run "podmin push docker.io/library/nginx:1.27", then use the reference it prints, registry.podmin.internal/apps/library/nginx:1.27`},
		{in: pause + "x:1", err: `"registry.podmin.internal/mirror/registry.k8s.io/pausex:1" is not a platform image: mirror/ holds only the images Podmin manages (registry.k8s.io/pause, docker.io/cloudflare/cloudflared); run "podmin push registry.k8s.io/pausex:1", then use the reference it prints, registry.podmin.internal/apps/pausex:1`},
		// Other registries: the push command that fixes it.
		{in: "docker.io/library/nginx:1.27",
			err: `"docker.io/library/nginx:1.27" is not in the cluster registry, the only one nodes pull from: run "podmin push docker.io/library/nginx:1.27", then use the reference it prints, registry.podmin.internal/apps/library/nginx:1.27`},
		{in: "ghcr.io/org/app",
			err: `"ghcr.io/org/app" is not in the cluster registry, the only one nodes pull from: run "podmin push ghcr.io/org/app", then use the reference it prints, registry.podmin.internal/apps/org/app:latest`},
		{in: "quay.io/org/app:1@" + sha256Dig,
			err: `"quay.io/org/app:1@` + sha256Dig + `" is not in the cluster registry, the only one nodes pull from: run "podmin push quay.io/org/app:1@` + sha256Dig + `" and use the reference it prints`},
		{in: "localhost:5000/app",
			err: `"localhost:5000/app" is not in the cluster registry, the only one nodes pull from: run "podmin push localhost:5000/app", then use the reference it prints, registry.podmin.internal/apps/app:latest`},
		{in: "[fd00::1]:5000/app:v1",
			err: `"[fd00::1]:5000/app:v1" is not in the cluster registry, the only one nodes pull from: run "podmin push '[fd00::1]:5000/app:v1'", then use the reference it prints, registry.podmin.internal/apps/app:v1`},
		// The cluster registry written differently.
		{in: "registry.podmin.internal:5000/apps/hello",
			err: `"registry.podmin.internal:5000/apps/hello" names the cluster registry as "registry.podmin.internal:5000": write it exactly registry.podmin.internal, without a port or capitals`},
		{in: "Registry.Podmin.Internal/apps/hello",
			err: `"Registry.Podmin.Internal/apps/hello" names the cluster registry as "Registry.Podmin.Internal": write it exactly registry.podmin.internal, without a port or capitals`},
		{in: "registry.podmin.internal/hello:v1",
			err: `"registry.podmin.internal/hello:v1" is not a cluster image: cluster images live under registry.podmin.internal/apps/<repository>; write "registry.podmin.internal/apps/hello:v1" or the shorthand "hello:v1"`},
		{in: "registry.podmin.internal/apps/hello@sha512:" + strings.Repeat("a", 128),
			err: `"registry.podmin.internal/apps/hello@sha512:` + strings.Repeat("a", 128) + `" is not a valid cluster image reference: cluster images are addressed by sha256 digests; use the digest "podmin push" prints`},
		// Invalid references.
		{in: "", err: `"" is not a valid image reference: the reference is empty`},
		{in: "Hello:v1", err: `"Hello:v1" is not a valid image reference: repository component "Hello" must be lowercase letters and digits separated by '.', '_', '__' or '-'`},
		{in: "hello:-v1", err: `"hello:-v1" is not a valid image reference: tag "-v1" must start with a letter, a digit or '_'`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ResolveImage(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("ResolveImage(%q) = %q, %v\nwant error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ResolveImage(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if again, err := ResolveImage(got); err != nil || again != got {
				t.Errorf("ResolveImage(%q) = %q, %v; a resolved reference must resolve to itself", got, again, err)
			}
		})
	}
}

func TestPlatformImages(t *testing.T) {
	for _, p := range PlatformImages() {
		if got, err := ResolveImage(p.Repository() + ":1"); err != nil || got != p.Repository()+":1" {
			t.Errorf("platform image %s: ResolveImage = %q, %v", p.Name, got, err)
		}
		if !strings.HasPrefix(p.Repository(), ClusterRegistry+"/mirror/") {
			t.Errorf("platform image %s is not beneath mirror/: %s", p.Name, p.Repository())
		}
	}
}

func TestExtractImages(t *testing.T) {
	two := set(base+".containers", []any{container("web", "registry.podmin.internal/apps/web:v1"), container("sidecar", "")})
	withInit := set(base+".initContainers", []any{container("migrate", "")})
	imageOf := func(t *testing.T, in []byte, opts ExtractOptions, i int) string {
		t.Helper()
		r, err := Extract(in, opts)
		if err != nil {
			t.Fatal(err)
		}
		return r.Pod.Spec.Containers[i].Image
	}
	t.Run("bare override resolves shorthand", func(t *testing.T) {
		if got := imageOf(t, ds(), ExtractOptions{Images: []string{"hello:v2"}}, 0); got != "registry.podmin.internal/apps/hello:v2" {
			t.Errorf("image = %q", got)
		}
	})
	t.Run("named override adds a missing image", func(t *testing.T) {
		if got := imageOf(t, ds(two), ExtractOptions{Images: []string{"sidecar=org/proxy:1"}}, 1); got != "registry.podmin.internal/apps/org/proxy:1" {
			t.Errorf("image = %q", got)
		}
	})
	t.Run("manifest shorthand resolves beneath apps", func(t *testing.T) {
		if got := imageOf(t, ds(set(base+".containers.0.image", "nginx:1.27")), ExtractOptions{}, 0); got != "registry.podmin.internal/apps/nginx:1.27" {
			t.Errorf("image = %q", got)
		}
	})
	t.Run("manifest init container shorthand resolves", func(t *testing.T) {
		r, err := Extract(ds(set(base+".initContainers", []any{container("migrate", "team/migrate:v3")})), ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Pod.Spec.InitContainers[0].Image; got != "registry.podmin.internal/apps/team/migrate:v3" {
			t.Errorf("init image = %q", got)
		}
		if !strings.Contains(string(r.PodYAML), "image: registry.podmin.internal/apps/team/migrate:v3\n") {
			t.Errorf("payload does not carry the resolved reference:\n%s", r.PodYAML)
		}
	})
	runExtractCases(t, []extractCase{
		{name: "no image field with bare override", in: ds(set(base+".containers.0", container("web", ""))), opts: ExtractOptions{Images: []string{"web:v1"}}},
		{name: "named subset", in: ds(two, withInit), opts: ExtractOptions{Images: []string{"sidecar=proxy:v1", "migrate=migrate:v1"}}},
		{name: "missing image", in: ds(two), want: "DaemonSet spec.template.spec.containers[1].image: is required: set it in the manifest or pass the image option sidecar=<reference>"},
		{name: "missing init image", in: ds(withInit), opts: ExtractOptions{Images: []string{"web=web:v2"}}, want: "DaemonSet spec.template.spec.initContainers[0].image: is required: set it in the manifest or pass the image option migrate=<reference>"},
		{name: "bare with two containers", in: ds(two), opts: ExtractOptions{Images: []string{"hello:v1"}}, want: `image "hello:v1": a bare image needs a template with exactly one container, but it has 2; name the container as <container>=<reference>`},
		{name: "bare with an init container", in: ds(withInit), opts: ExtractOptions{Images: []string{"hello:v1"}}, want: `image "hello:v1": a bare image needs a template with exactly one container, but it has 2; name the container as <container>=<reference>`},
		{name: "bare and named", in: ds(two), opts: ExtractOptions{Images: []string{"sidecar=proxy:v1", "hello:v1"}}, want: `image "hello:v1": bare and named images cannot be combined; name every image as <container>=<reference>`},
		{name: "two bare", in: ds(), opts: ExtractOptions{Images: []string{"a:v1", "b:v1"}}, want: `image "b:v1": only one bare image is allowed; name each image as <container>=<reference>`},
		{name: "duplicate name", in: ds(two), opts: ExtractOptions{Images: []string{"sidecar=a:v1", "sidecar=b:v1"}}, want: `image "sidecar=b:v1": container "sidecar" is named twice; give each container one image`},
		{name: "unknown name", in: ds(two, withInit), opts: ExtractOptions{Images: []string{"sidecar=a:v1", "db=b:v1"}}, want: `image "db=b:v1": no container or init container is named "db"; use one of: migrate, web, sidecar`},
		{name: "empty name", in: ds(), opts: ExtractOptions{Images: []string{"=a:v1"}}, want: `image "=a:v1": the container name is empty: use <container>=<reference>`},
		{name: "empty reference", in: ds(), opts: ExtractOptions{Images: []string{"web="}}, want: `image "web=": the reference is empty: use <reference> or <container>=<reference>`},
		{name: "invalid override", in: ds(), opts: ExtractOptions{Images: []string{"web=Hello"}}, want: `image "web=Hello": "Hello" is not a valid image reference: repository component "Hello" must be lowercase letters and digits separated by '.', '_', '__' or '-'`},
		{name: "invalid manifest image", in: ds(set(base+".containers.0.image", "nginx:@")), want: `DaemonSet spec.template.spec.containers[0].image: "nginx:@" is not a valid image reference: invalid checksum digest format: ; write [registry/]repository[:tag][@sha256:<hex>], e.g. hello:v1`},
		{name: "invalid cluster image", in: ds(set(base+".containers.0.image", "registry.podmin.internal/web:v1")), want: `DaemonSet spec.template.spec.containers[0].image: "registry.podmin.internal/web:v1" is not a cluster image: cluster images live under registry.podmin.internal/apps/<repository>; write "registry.podmin.internal/apps/web:v1" or the shorthand "web:v1"`},
		{name: "other registry in a manifest", in: ds(set(base+".containers.0.image", "docker.io/library/nginx:1.27")),
			want: `DaemonSet spec.template.spec.containers[0].image: "docker.io/library/nginx:1.27" is not in the cluster registry, the only one nodes pull from: run "podmin push docker.io/library/nginx:1.27", then use the reference it prints, registry.podmin.internal/apps/library/nginx:1.27`},
		{name: "other registry in an init container", in: ds(set(base+".initContainers", []any{container("migrate", "ghcr.io/org/migrate:v3")})),
			want: `DaemonSet spec.template.spec.initContainers[0].image: "ghcr.io/org/migrate:v3" is not in the cluster registry, the only one nodes pull from: run "podmin push ghcr.io/org/migrate:v3", then use the reference it prints, registry.podmin.internal/apps/org/migrate:v3`},
		{name: "other registry as an override", in: ds(), opts: ExtractOptions{Images: []string{"web=quay.io/org/web:1"}},
			want: `image "web=quay.io/org/web:1": "quay.io/org/web:1" is not in the cluster registry, the only one nodes pull from: run "podmin push quay.io/org/web:1", then use the reference it prints, registry.podmin.internal/apps/org/web:1`},
		{name: "platform mirror image", in: ds(set(base+".containers.0.image", "registry.podmin.internal/mirror/docker.io/cloudflare/cloudflared:2025.6.0"))},
		{name: "mirror image of a user", in: ds(set(base+".containers.0.image", "registry.podmin.internal/mirror/ghcr.io/org/web:1")),
			want: `DaemonSet spec.template.spec.containers[0].image: "registry.podmin.internal/mirror/ghcr.io/org/web:1" is not a platform image: mirror/ holds only the images Podmin manages (registry.k8s.io/pause, docker.io/cloudflare/cloudflared); run "podmin push ghcr.io/org/web:1", then use the reference it prints, registry.podmin.internal/apps/org/web:1`},
	})
}
