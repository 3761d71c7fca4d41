// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"bytes"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func buildOpts(f func(o *BuildOptions)) BuildOptions {
	o := BuildOptions{Name: "app", NodeGroup: "workers", Images: []string{"hello:v1"}}
	if f != nil {
		f(&o)
	}
	return o
}

func TestBuildRules(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "HOME_REGION" {
			return "eu-west-1", true
		}
		return "", false
	}
	for _, tc := range []struct {
		name string
		opts BuildOptions
		want string
	}{
		{name: "minimal", opts: buildOpts(nil)},
		{name: "named images", opts: buildOpts(func(o *BuildOptions) {
			o.Images = []string{"web=registry.podmin.internal/apps/example/web:v1", "sidecar=registry.podmin.internal/apps/example/sidecar:v1"}
		})},
		{name: "everything", opts: buildOpts(func(o *BuildOptions) {
			o.Namespace, o.Service, o.CPU, o.Memory = "product", true, "250m", "128Mi"
			o.Env, o.LookupEnv = []string{"LOG=debug", "HOME_REGION"}, lookup
			o.Secrets, o.SecretsProvider = []string{"database-url", "log-level"}, "aws-parameter-store"
		})},
		{name: "ports", opts: buildOpts(func(o *BuildOptions) { o.Ports = []string{"80:8080,443:8443", "9090:9090"} })},
		{name: "name missing", opts: buildOpts(func(o *BuildOptions) { o.Name = "" }), want: "name: DaemonSet name is required"},
		{name: "name not a service name", opts: buildOpts(func(o *BuildOptions) { o.Name, o.Service = "1app", true }), want: `name: "1app" cannot name the built-in Service: Service names start with a letter; rename the DaemonSet`},
		{name: "nodegroup invalid", opts: buildOpts(func(o *BuildOptions) { o.NodeGroup = "Workers" }), want: `nodegroup: "Workers" is not a valid NodeGroup name: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit`},
		{name: "namespace reserved", opts: buildOpts(func(o *BuildOptions) { o.Namespace = "_system" }), want: `namespace: "_system" is reserved for Podmin system state; choose another namespace`},
		{name: "no image", opts: buildOpts(func(o *BuildOptions) { o.Images = nil }), want: "image: at least one image is required: pass <reference> or <container>=<reference>"},
		{name: "bare and named", opts: buildOpts(func(o *BuildOptions) { o.Images = []string{"a:v1", "b=b:v1"} }), want: `image "a:v1": bare and named images cannot be combined; name every image as <container>=<reference>`},
		{name: "port syntax", opts: buildOpts(func(o *BuildOptions) { o.Ports = []string{"443"} }), want: `port "443": "443" must be SERVICE:TARGET, e.g. 443:8443`},
		{name: "port not a number", opts: buildOpts(func(o *BuildOptions) { o.Ports = []string{"https:8443"} }), want: `port "https:8443": "https" is not a port number: use 1 to 65535`},
		{name: "port out of range", opts: buildOpts(func(o *BuildOptions) { o.Ports = []string{"443:70000"} }), want: `port "443:70000": port 70000 is out of range: use 1 to 65535`},
		{name: "port empty item", opts: buildOpts(func(o *BuildOptions) { o.Ports = []string{"443:8443,"} }), want: `port "443:8443,": "" must be SERVICE:TARGET, e.g. 443:8443`},
		{name: "duplicate port", opts: buildOpts(func(o *BuildOptions) { o.Ports = []string{"443:8443", "443:9443"} }), want: `port "443:9443": service port 443 is given twice; give each service port once`},
		{name: "service with two images", opts: buildOpts(func(o *BuildOptions) { o.Images, o.Service = []string{"a=a:v1", "b=b:v1"}, true }), want: "service: the built-in Service needs exactly one image, not 2; write the Service into a manifest file instead"},
		{name: "ports with two images", opts: buildOpts(func(o *BuildOptions) { o.Images, o.Ports = []string{"a=a:v1", "b=b:v1"}, []string{"80:80"} }), want: "service: the built-in Service needs exactly one image, not 2; write the Service into a manifest file instead"},
		{name: "zero cpu", opts: buildOpts(func(o *BuildOptions) { o.CPU = "0" }), want: `cpu "0": must be a positive Kubernetes quantity such as 500m or 2`},
		{name: "negative memory", opts: buildOpts(func(o *BuildOptions) { o.Memory = "-1Gi" }), want: `memory "-1Gi": must be a positive Kubernetes quantity such as 256Mi or 1Gi`},
		{name: "bad quantity", opts: buildOpts(func(o *BuildOptions) { o.Memory = "lots" }), want: `memory "lots": must be a positive Kubernetes quantity such as 256Mi or 1Gi`},
		{name: "env key invalid", opts: buildOpts(func(o *BuildOptions) { o.Env = []string{"1X=y"} }), want: `env "1X=y": "1X" is not a valid variable name: use letters, digits, '_', '-' or '.', not starting with a digit`},
		{name: "env unset", opts: buildOpts(func(o *BuildOptions) { o.Env, o.LookupEnv = []string{"MISSING"}, lookup }), want: `env "MISSING": "MISSING" is not set in the environment; pass it as KEY=VALUE`},
		{name: "env twice", opts: buildOpts(func(o *BuildOptions) { o.Env = []string{"A=1", "A=2"} }), want: `env "A=2": "A" is set twice; set each variable once`},
		{name: "secret key unsafe", opts: buildOpts(func(o *BuildOptions) { o.Secrets, o.SecretsProvider = []string{"a/b"}, "aws-secrets-manager" }), want: `secret "a/b": "a/b" is not a safe key: use 1 to 255 letters, digits, '.', '_' or '-' (not "." or ".."), separated by commas without spaces`},
		{name: "secret key twice", opts: buildOpts(func(o *BuildOptions) { o.Secrets, o.SecretsProvider = []string{"a", "a"}, "aws-secrets-manager" }), want: `secret "a": is listed twice; list each key once`},
		{name: "secrets provider unknown", opts: buildOpts(func(o *BuildOptions) { o.Secrets, o.SecretsProvider = []string{"a"}, "vault" }), want: `secrets provider "vault": is not supported: use aws-parameter-store or aws-secrets-manager or local`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Build(tc.opts)
			if tc.want != "" {
				if err == nil || err.Error() != tc.want {
					t.Fatalf("Build() error = %v\nwant %s", err, tc.want)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Error("error does not wrap ErrInvalid")
				}
				return
			}
			if err != nil {
				t.Fatalf("Build() error = %v", err)
			}
			again, _ := Build(tc.opts)
			if !bytes.Equal(out, again) {
				t.Error("Build() is not deterministic")
			}
			if _, err := Extract(out, ExtractOptions{Name: tc.opts.Name, NodeGroup: tc.opts.NodeGroup, RequireService: tc.opts.Service}); err != nil {
				t.Fatalf("Extract(Build()) error = %v\n%s", err, out)
			}
		})
	}
}

func TestBuildShape(t *testing.T) {
	extract := func(t *testing.T, o BuildOptions) *Result {
		t.Helper()
		out, err := Build(o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Extract(out, ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("bare image names the container", func(t *testing.T) {
		r := extract(t, buildOpts(nil))
		c := r.Pod.Spec.Containers[0]
		if c.Name != "app" || c.Image != "registry.podmin.internal/apps/hello:v1" || r.Service != nil {
			t.Errorf("container = %s %s, service %v", c.Name, c.Image, r.Service)
		}
	})
	t.Run("default service", func(t *testing.T) {
		r := extract(t, buildOpts(func(o *BuildOptions) { o.Service = true }))
		want := []Port{{Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: 8443}}
		if r.Service == nil || len(r.Service.Ports) != 1 || r.Service.Ports[0] != want[0] {
			t.Fatalf("Service = %+v", r.Service)
		}
		probe := r.Pod.Spec.Containers[0].ReadinessProbe
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" || probe.HTTPGet.Port.IntVal != 8443 || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS || probe.PeriodSeconds != 2 {
			t.Errorf("probe = %+v", probe)
		}
	})
	t.Run("ports replace the default", func(t *testing.T) {
		r := extract(t, buildOpts(func(o *BuildOptions) { o.Ports = []string{"80:8080,443:8443"} }))
		if r.Service == nil || len(r.Service.Ports) != 2 || r.Service.Ports[0].TargetPort != 8080 {
			t.Fatalf("Service = %+v", r.Service)
		}
		probe := r.Pod.Spec.Containers[0].ReadinessProbe
		if probe == nil || probe.TCPSocket == nil || probe.TCPSocket.Port.IntVal != 8080 || probe.PeriodSeconds != 2 {
			t.Errorf("probe = %+v", probe)
		}
	})
	t.Run("limits env and secrets on every container", func(t *testing.T) {
		r := extract(t, buildOpts(func(o *BuildOptions) {
			o.Images = []string{"web=web:v1", "proxy=proxy:v1"}
			o.CPU, o.Memory, o.Env = "1", "1Gi", []string{"A=b"}
			o.Secrets, o.SecretsProvider = []string{"token"}, "aws-secrets-manager"
		}))
		for _, c := range r.Pod.Spec.Containers {
			if c.Resources.Limits.Cpu().String() != "1" || c.Resources.Limits.Memory().String() != "1Gi" || len(c.Env) != 1 {
				t.Errorf("container %s = %+v", c.Name, c)
			}
		}
		if got := r.Pod.Annotations["podmin.dev/aws-secrets-manager"]; got != "token" {
			t.Errorf("secrets annotation = %q", got)
		}
	})
}
