// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

type extractCase struct {
	name string
	in   []byte
	opts ExtractOptions
	want string // exact error text; "" means success
}

func runExtractCases(t *testing.T, cases []extractCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Extract(tc.in, tc.opts)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Extract() error = %v, want success", err)
				}
				if r.Pod == nil || len(r.PodYAML) == 0 {
					t.Fatal("Extract() returned no Pod")
				}
				return
			}
			if err == nil {
				t.Fatalf("Extract() succeeded, want error %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Fatalf("Extract() error =\n%s\nwant\n%s", got, tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid")
			}
		})
	}
}

const base = "spec.template.spec"

func TestExtractStream(t *testing.T) {
	svc := toYAML(baseService())
	d := toYAML(baseDaemonSet())
	runExtractCases(t, []extractCase{
		{name: "daemonset only", in: []byte(d)},
		{name: "service first", in: []byte(svc + "---\n" + d)},
		{name: "empty documents ignored", in: []byte("---\n---\n# comment\n---\n" + d + "---\n")},
		{name: "json", in: []byte(`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"web"},"spec":{"template":{"spec":{"nodeSelector":{"podmin.dev/nodegroup":"workers"},"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`)},
		{name: "empty stream", in: []byte("---\n"), want: "the manifest has no apps/v1 DaemonSet: add one"},
		{name: "only a service", in: []byte(svc), want: "the manifest has no apps/v1 DaemonSet: add one"},
		{name: "two daemonsets", in: []byte(d + "---\n" + d), want: "document 2: a second DaemonSet is not supported: a deployment stream holds exactly one; deploy each DaemonSet separately"},
		{name: "two services", in: []byte(d + "---\n" + svc + "---\n" + svc), want: "document 3: a second Service is not supported: a deployment stream holds at most one; deploy each Service with its own DaemonSet"},
		{name: "other kind", in: []byte(d + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), want: `document 2 kind: "ConfigMap" is not supported: a deployment stream holds one apps/v1 DaemonSet and at most one v1 Service; remove it`},
		{name: "daemonset apiVersion", in: []byte(strings.Replace(d, "apps/v1", "extensions/v1beta1", 1)), want: `document 1 apiVersion: "extensions/v1beta1" is not supported for a DaemonSet: use apps/v1`},
		{name: "service apiVersion", in: []byte(d + "---\n" + strings.Replace(svc, "apiVersion: v1", "apiVersion: v2", 1)), want: `document 2 apiVersion: "v2" is not supported for a Service: use v1`},
		{name: "missing kind", in: []byte("apiVersion: v1\nmetadata: {name: x}\n"), want: "document 1 kind: is required: each document must be an apps/v1 DaemonSet or a v1 Service"},
		{name: "not an object", in: []byte("- a\n- b\n"), want: "document 1: must be a Kubernetes object with apiVersion and kind, not a list"},
		{name: "duplicate key", in: []byte(d + "kind: DaemonSet\n"), want: `document 1: invalid YAML: yaml: unmarshal errors:
  line 20: key "kind" already set in map`},
		{name: "invalid separator", in: []byte(d + "--- x\n"), want: "document 1: invalid YAML: invalid Yaml document separator: x"},
		{name: "too large", in: make([]byte, MaxManifestBytes+1), want: "the manifest is 1048577 bytes; the limit is 1048576 bytes"},
		{name: "require service present", in: withSvc(), opts: ExtractOptions{RequireService: true}},
		{name: "require service missing", in: ds(), opts: ExtractOptions{RequireService: true}, want: "the manifest has no v1 Service, but one is required: add a Service or deploy without the service option"},
	})
}

func TestExtractStrictFields(t *testing.T) {
	runExtractCases(t, []extractCase{
		{name: "known fields", in: ds(set("spec.template.spec.hostNetwork", true))},
		{name: "typo", in: ds(set("spec.template.spec.nodeSelecter", map[string]any{})), want: "DaemonSet spec.template.spec.nodeSelecter: unknown field: check its spelling, case and indentation"},
		{name: "case differs", in: ds(set("spec.template.spec.HostNetwork", true)), want: "DaemonSet spec.template.spec.HostNetwork: unknown field: check its spelling, case and indentation"},
		{name: "nested typo in container", in: ds(set("spec.template.spec.containers.0.imagePullPolicyy", "Always")), want: "DaemonSet spec.template.spec.containers[0].imagePullPolicyy: unknown field: check its spelling, case and indentation"},
		{name: "number for string", in: ds(set("spec.template.metadata.annotations", map[string]any{"prometheus.io/port": 9100})), want: `DaemonSet spec.template.metadata.annotations["prometheus.io/port"]: must be a string, not 9100; quote it`},
		{name: "string for integer", in: ds(set("spec.template.spec.containers.0.ports", []any{map[string]any{"containerPort": "80"}})), want: `DaemonSet spec.template.spec.containers[0].ports[0].containerPort: must be an integer of at most 32 bits, not "80"`},
		{name: "bad quantity", in: ds(set("spec.template.spec.containers.0.resources", map[string]any{"limits": map[string]any{"cpu": "lots"}})), want: `DaemonSet spec.template.spec.containers[0].resources.limits["cpu"]: invalid value "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{name: "several problems joined", in: ds(set("spec.foo", 1), set("spec.bar", 2)), want: "DaemonSet spec.bar: unknown field: check its spelling, case and indentation\nDaemonSet spec.foo: unknown field: check its spelling, case and indentation"},
	})
}

func TestExtractDaemonSetRules(t *testing.T) {
	runExtractCases(t, []extractCase{
		{name: "name matches", in: ds(), opts: ExtractOptions{Name: "web", NodeGroup: "workers"}},
		{name: "name missing", in: ds(del("metadata.name")), want: "DaemonSet metadata.name: DaemonSet name is required"},
		{name: "name invalid", in: ds(set("metadata.name", "Web")), want: `DaemonSet metadata.name: "Web" is not a valid DaemonSet name: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit`},
		{name: "name mismatch", in: ds(), opts: ExtractOptions{Name: "api"}, want: `DaemonSet metadata.name: "web" does not match the deployment name "api"; rename the DaemonSet or deploy it as "web"`},
		{name: "namespace defaults", in: ds(del("metadata.namespace"))},
		{name: "namespace reserved", in: ds(set("metadata.namespace", "_system")), want: `DaemonSet metadata.namespace: "_system" is reserved for Podmin system state; choose another namespace`},
		{name: "namespace invalid", in: ds(set("metadata.namespace", "Product")), want: `DaemonSet metadata.namespace: "Product" is not a valid namespace: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit`},
		{name: "selector missing", in: ds(del("spec.template.spec.nodeSelector")), want: "DaemonSet spec.template.spec.nodeSelector: podmin.dev/nodegroup is required: set it to the NodeGroup that runs this DaemonSet"},
		{name: "selector extra key", in: ds(set(base+".nodeSelector", map[string]any{"podmin.dev/nodegroup": "workers", "kubernetes.io/arch": "arm64"})), want: `DaemonSet spec.template.spec.nodeSelector["kubernetes.io/arch"]: not supported: Podmin schedules only by the podmin.dev/nodegroup node selector; remove it`},
		{name: "selector value invalid", in: ds(set(base+".nodeSelector", map[string]any{"podmin.dev/nodegroup": "Workers"})), want: `DaemonSet spec.template.spec.nodeSelector["podmin.dev/nodegroup"]: "Workers" is not a valid NodeGroup name: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit`},
		{name: "selector nodegroup mismatch", in: ds(), opts: ExtractOptions{NodeGroup: "edge"}, want: `DaemonSet spec.template.spec.nodeSelector["podmin.dev/nodegroup"]: "workers" does not match the requested NodeGroup "edge"; change the selector or deploy to "workers"`},
		{name: "nodeName", in: ds(set(base+".nodeName", "n1")), want: "DaemonSet spec.template.spec.nodeName: not supported: Podmin schedules only by the podmin.dev/nodegroup node selector; remove it"},
		{name: "affinity", in: ds(set(base+".affinity", map[string]any{"nodeAffinity": map[string]any{}})), want: "DaemonSet spec.template.spec.affinity: not supported: Podmin schedules only by the podmin.dev/nodegroup node selector; remove it"},
		{name: "schedulerName", in: ds(set(base+".schedulerName", "default-scheduler")), want: "DaemonSet spec.template.spec.schedulerName: not supported: Podmin schedules only by the podmin.dev/nodegroup node selector; remove it"},
		{name: "topologySpreadConstraints", in: ds(set(base+".topologySpreadConstraints", []any{map[string]any{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}})), want: "DaemonSet spec.template.spec.topologySpreadConstraints: not supported: Podmin schedules only by the podmin.dev/nodegroup node selector; remove it"},
		{name: "tolerations preserved", in: ds(set(base+".tolerations", []any{map[string]any{"operator": "Exists"}}))},
		{name: "ephemeral containers", in: ds(set(base+".ephemeralContainers", []any{map[string]any{"name": "debug", "image": "busybox"}})), want: "DaemonSet spec.template.spec.ephemeralContainers: not supported: ephemeral containers are added to running Pods through the Kubernetes API, which Podmin does not have; remove them"},
		{name: "no containers", in: ds(set(base+".containers", []any{})), want: "DaemonSet spec.template.spec.containers: at least one container is required"},
		{name: "duplicate container names", in: ds(set(base+".initContainers", []any{container("web", "busybox")})), want: `DaemonSet spec.template.spec.containers[0].name: "web" is used by another container; give every container and init container a unique name`},
		{name: "container name invalid", in: ds(set(base+".containers.0.name", "Web_1")), want: `DaemonSet spec.template.spec.containers[0].name: "Web_1" is not a valid container name: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit`},
		{name: "pull policy kept", in: ds(set(base+".containers.0.imagePullPolicy", "IfNotPresent"))},
		{name: "pull policy invalid", in: ds(set(base+".containers.0.imagePullPolicy", "Sometimes")), want: `DaemonSet spec.template.spec.containers[0].imagePullPolicy: "Sometimes" is not valid: use Always, IfNotPresent or Never`},
		{name: "template creationTimestamp null", in: ds(set("spec.template.metadata.creationTimestamp", nil))},
		{name: "template generateName", in: ds(set("spec.template.metadata.generateName", "web-")), want: "DaemonSet spec.template.metadata.generateName: not supported in a Pod template: Podmin sets the Pod's name and namespace and keeps only labels and annotations; remove it"},
		{name: "template label invalid", in: ds(set("spec.template.metadata.labels", map[string]any{"app": "web", "bad key": "x"})), want: `DaemonSet spec.template.metadata.labels["bad key"]: "bad key" is not a valid label key: use an optional DNS subdomain prefix and '/', then 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`},
	})
}

func TestExtractAnnotations(t *testing.T) {
	ann := func(k, v string) mutation { return set("spec.template.metadata.annotations", map[string]any{k: v}) }
	runExtractCases(t, []extractCase{
		{name: "secrets", in: ds(ann("podmin.dev/aws-parameter-store", "database-url,log-level"))},
		{name: "secrets manager", in: ds(ann("podmin.dev/aws-secrets-manager", "oauth-token"))},
		{name: "local secrets", in: ds(ann("podmin.dev/local", "db-url"))},
		{name: "other annotations kept", in: ds(ann("prometheus.io/scrape", "true"))},
		{name: "unsafe secret key", in: ds(ann("podmin.dev/aws-parameter-store", "../etc")), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/aws-parameter-store"]: "../etc" is not a safe key: use 1 to 255 letters, digits, '.', '_' or '-' (not "." or ".."), separated by commas without spaces`},
		{name: "dot dot key", in: ds(ann("podmin.dev/aws-parameter-store", "a,..")), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/aws-parameter-store"]: ".." is not a safe key: use 1 to 255 letters, digits, '.', '_' or '-' (not "." or ".."), separated by commas without spaces`},
		{name: "duplicate secret key", in: ds(ann("podmin.dev/aws-secrets-manager", "a,a")), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/aws-secrets-manager"]: key "a" is listed twice; list each key once`},
		{name: "empty secret list", in: ds(ann("podmin.dev/aws-secrets-manager", "")), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/aws-secrets-manager"]: no keys: list them separated by commas, e.g. database-url,log-level`},
		{name: "reserved service annotation", in: ds(ann("podmin.dev/service", "frontend")), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/service"]: is reserved: Podmin sets it; remove it`},
		{name: "unknown podmin annotation", in: ds(ann("podmin.dev/aws-paramter-store", "x")), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/aws-paramter-store"]: unknown Podmin annotation: use podmin.dev/aws-parameter-store or podmin.dev/aws-secrets-manager or podmin.dev/local`},
	})
}

func TestExtractTransform(t *testing.T) {
	in := stream([]mutation{
		set(base+".initContainers", []any{container("migrate", "registry.podmin.internal/apps/migrate:v1")}),
		set(base+".containers.0.imagePullPolicy", "IfNotPresent"),
		set("spec.template.metadata.name", "ignored"),
	}, nil, true)
	r, err := Extract(in, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "web" || r.Namespace != "product" || r.NodeGroup != "workers" {
		t.Errorf("identity = %s/%s/%s", r.NodeGroup, r.Namespace, r.Name)
	}
	pod := r.Pod
	if pod.Name != "web" || pod.Namespace != "product" {
		t.Errorf("Pod name = %s/%s, want product/web", pod.Namespace, pod.Name)
	}
	if pod.Spec.NodeSelector != nil {
		t.Errorf("NodeSelector = %v, want removed", pod.Spec.NodeSelector)
	}
	if got := pod.Annotations[ServiceAnnotation]; got != "frontend" {
		t.Errorf("service annotation = %q, want frontend", got)
	}
	if got := pod.Spec.InitContainers[0].ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("init pull policy = %q, want Always", got)
	}
	if got := pod.Spec.Containers[0].ImagePullPolicy; got != corev1.PullIfNotPresent {
		t.Errorf("explicit pull policy = %q, want IfNotPresent", got)
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if n := len(c.VolumeMounts); n != 1 || !isIdentityMount(c.VolumeMounts[0]) {
			t.Errorf("container %s mounts = %v, want the identity mount", c.Name, c.VolumeMounts)
		}
	}
	if n := len(pod.Spec.Volumes); n != 1 || pod.Spec.Volumes[0].HostPath.Path != "/run/podmin/workloads/web/identity" {
		t.Errorf("volumes = %v", pod.Spec.Volumes)
	}
	for _, noise := range []string{"creationTimestamp", "status", "nodeSelector", "podmin.dev/nodegroup", "ignored"} {
		if strings.Contains(string(r.PodYAML), noise) {
			t.Errorf("PodYAML contains %q:\n%s", noise, r.PodYAML)
		}
	}
	// Without a Service there is no annotation and no Service payload.
	r, err = Extract(ds(), ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Pod.Annotations[ServiceAnnotation]; ok || r.Service != nil || r.ServiceYAML != nil {
		t.Errorf("no-Service extraction has service state: %v %v %q", r.Pod.Annotations, r.Service, r.ServiceYAML)
	}
}

// TestExtractControlCharacters is the Extract side of a FuzzBuild crash:
// escaped control characters are valid YAML and must survive encoding.
func TestExtractControlCharacters(t *testing.T) {
	in := strings.Replace(toYAML(baseDaemonSet()), "  template:\n", "  template:\n    metadata:\n      annotations:\n        note: \"bell\\a del\\x7f\"\n", 1)
	in = strings.Replace(in, "    metadata:\n      labels:", "      labels:", 1)
	r, err := Extract([]byte(in), ExtractOptions{})
	if err != nil {
		t.Fatalf("Extract() error = %v\n%s", err, in)
	}
	if got := r.Pod.Annotations["note"]; got != "bell\a del\x7f" {
		t.Errorf("annotation = %q", got)
	}
	var back corev1.Pod
	if err := yaml.UnmarshalStrict(r.PodYAML, &back); err != nil || back.Annotations["note"] != "bell\a del\x7f" {
		t.Errorf("PodYAML round trip = %q, %v\n%s", back.Annotations["note"], err, r.PodYAML)
	}
}
