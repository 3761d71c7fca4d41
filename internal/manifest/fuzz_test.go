// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// FuzzExtract feeds arbitrary streams and image options to Extract. It
// must never panic, every rejection must be a validation error, and every
// success must be deterministic and round-trip through its own payloads.
func FuzzExtract(f *testing.F) {
	for _, file := range corpusFiles(f) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
	}
	f.Add(ds(), "hello:v1")
	f.Add(withSvc(), "web=registry.podmin.internal/apps/web@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945")
	f.Add([]byte("---\n---\n"), "")
	f.Add([]byte("a: &a [*a, *a]\n"), "=")
	f.Add([]byte(`{"kind":"DaemonSet"}{"kind":"Service"}`), "a=b,c")
	f.Fuzz(func(t *testing.T, data []byte, images string) {
		var opts ExtractOptions
		if images != "" {
			opts.Images = strings.Split(images, ",")
		}
		r, err := Extract(data, opts)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Extract() error is not ErrInvalid: %v", err)
			}
			return
		}
		again, err := Extract(data, opts)
		if err != nil || !bytes.Equal(r.PodYAML, again.PodYAML) || !bytes.Equal(r.ServiceYAML, again.ServiceYAML) {
			t.Fatalf("second extraction differs: %v", err)
		}
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(r.PodYAML, &pod); err != nil {
			t.Fatalf("PodYAML does not decode: %v\n%s", err, r.PodYAML)
		}
		if bytes.Contains(r.PodYAML, []byte("creationTimestamp")) {
			t.Fatalf("PodYAML contains creationTimestamp:\n%s", r.PodYAML)
		}
		if r.Service != nil {
			back, err := DecodeService(r.ServiceYAML)
			if err != nil || !reflect.DeepEqual(back, r.Service) {
				t.Fatalf("ServiceYAML does not round-trip: %v\n%s", err, r.ServiceYAML)
			}
		}
	})
}

// FuzzBuild checks that every accepted option set builds a manifest that
// Extract accepts (Build verifies that itself and reports a non-ErrInvalid
// error when it does not), and that Build never panics.
func FuzzBuild(f *testing.F) {
	f.Add("app", "workers", "", "hello:v1", "", "", "", "A=b", "", false)
	f.Add("app", "workers", "product", "web=a:v1,side=b:v1", "", "500m", "1Gi", "", "db-url", false)
	f.Add("app", "workers", "", "hello:v1", "443:8443,80:8080", "", "", "HOME", "", true)
	f.Add("1app", "Workers", "_system", "=", "0:0", "-1", "x", "1=", "..", true)
	f.Fuzz(func(t *testing.T, name, nodeGroup, ns, images, ports, cpu, memory, env, secrets string, service bool) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		opts := BuildOptions{
			Name: name, NodeGroup: nodeGroup, Namespace: ns, Images: split(images),
			Service: service, CPU: cpu, Memory: memory, Env: split(env),
			LookupEnv:       func(k string) (string, bool) { return "from-env", k == "HOME" },
			Secrets:         split(secrets),
			SecretsProvider: "aws-parameter-store",
		}
		if ports != "" {
			opts.Ports = []string{ports}
		}
		out, err := Build(opts)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Build() failed its own output: %v", err)
			}
			return
		}
		if _, err := Extract(out, ExtractOptions{Name: name, NodeGroup: nodeGroup, RequireService: service}); err != nil {
			t.Fatalf("Extract(Build()) error = %v\n%s", err, out)
		}
	})
}
