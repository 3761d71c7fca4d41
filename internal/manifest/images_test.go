// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import "testing"

func TestResolveImage(t *testing.T) {
	sha := "sha256:" + "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12"
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "hello", want: "registry.podmin.internal/apps/hello"},
		{in: "hello:v1", want: "registry.podmin.internal/apps/hello:v1"},
		{in: "example/web:v1", want: "registry.podmin.internal/apps/example/web:v1"},
		{in: "hello@" + sha, want: "registry.podmin.internal/apps/hello@" + sha},
		{in: "registry.podmin.internal/apps/hello:v1", want: "registry.podmin.internal/apps/hello:v1"},
		{in: "ghcr.io/org/app:1.2.3", want: "ghcr.io/org/app:1.2.3"},
		{in: "localhost:5000/app", want: "localhost:5000/app"},
		{in: "[fd00::1]:5000/app:v1", want: "[fd00::1]:5000/app:v1"},
		{in: "docker.io/library/nginx:1.27@" + sha, want: "docker.io/library/nginx:1.27@" + sha},
		{in: "", err: `"" is not a valid image reference: the reference is empty`},
		{in: "Hello:v1", err: `"Hello:v1" is not a valid image reference: repository component "Hello" must be lowercase letters and digits separated by '.', '_', '__' or '-'`},
		{in: "hello:-v1", err: `"hello:-v1" is not a valid image reference: tag "-v1" must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'`},
		{in: "hello@sha256:abc", err: `"hello@sha256:abc" is not a valid image reference: digest "sha256:abc" must be sha256:, sha384: or sha512: followed by its lowercase hex value`},
		{in: "bad_host.io:x/app", err: `"bad_host.io:x/app" is not a valid image reference: registry "bad_host.io:x" has an invalid port`},
		{in: "bad_host.io/app", err: `"bad_host.io/app" is not a valid image reference: registry host "bad_host.io" is not a valid hostname`},
		{in: "registry.podmin.internal/hello:v1", err: `"registry.podmin.internal/hello:v1" is not a valid cluster image reference: cluster images live under registry.podmin.internal/apps/<repository>; run "podmin push <image>" and use the reference it prints`},
		{in: "registry.podmin.internal/mirror/registry.k8s.io/pause:3.10", err: `"registry.podmin.internal/mirror/registry.k8s.io/pause:3.10" is not a valid cluster image reference: cluster images live under registry.podmin.internal/apps/<repository>; run "podmin push <image>" and use the reference it prints`},
		{in: "registry.podmin.internal:5000/apps/hello", err: `"registry.podmin.internal:5000/apps/hello" is not a valid cluster image reference: the cluster registry is registry.podmin.internal, without a port or capitals; run "podmin push <image>" and use the reference it prints`},
		{in: "registry.podmin.internal/apps/hello@sha512:" + string(make512()), err: `"registry.podmin.internal/apps/hello@sha512:` + string(make512()) + `" is not a valid cluster image reference: cluster digests are sha256; run "podmin push <image>" and use the reference it prints`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ResolveImage(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("ResolveImage(%q) error = %v, want %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ResolveImage(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func make512() []byte {
	b := make([]byte, 128)
	for i := range b {
		b[i] = 'a'
	}
	return b
}

func TestClusterRepository(t *testing.T) {
	r, err := ParseImageRef("registry.podmin.internal/apps/example/web:v1")
	if err != nil {
		t.Fatal(err)
	}
	if repo, ok := r.ClusterRepository(); !ok || repo != "example/web" || r.Tag != "v1" {
		t.Errorf("ClusterRepository() = %q, %v; tag %q", repo, ok, r.Tag)
	}
	r, _ = ParseImageRef("ghcr.io/apps/web")
	if _, ok := r.ClusterRepository(); ok {
		t.Error("ghcr.io reference reported as a cluster image")
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
		if got := imageOf(t, ds(two), ExtractOptions{Images: []string{"sidecar=ghcr.io/org/proxy:1"}}, 1); got != "ghcr.io/org/proxy:1" {
			t.Errorf("image = %q", got)
		}
	})
	t.Run("manifest shorthand keeps Kubernetes meaning", func(t *testing.T) {
		if got := imageOf(t, ds(set(base+".containers.0.image", "nginx:1.27")), ExtractOptions{}, 0); got != "nginx:1.27" {
			t.Errorf("image = %q", got)
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
		{name: "invalid manifest image", in: ds(set(base+".containers.0.image", "nginx:@")), want: `DaemonSet spec.template.spec.containers[0].image: "nginx:@" is not a valid image reference: digest "" must be sha256:, sha384: or sha512: followed by its lowercase hex value`},
		{name: "invalid cluster image", in: ds(set(base+".containers.0.image", "registry.podmin.internal/web:v1")), want: `DaemonSet spec.template.spec.containers[0].image: "registry.podmin.internal/web:v1" is not a valid cluster image reference: cluster images live under registry.podmin.internal/apps/<repository>; run "podmin push <image>" and use the reference it prints`},
		{name: "other registry passes", in: ds(set(base+".containers.0.image", "quay.io/prometheus/node-exporter:v1.9.1"))},
	})
}
