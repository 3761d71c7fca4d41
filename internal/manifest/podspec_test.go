// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"strings"
	"testing"
)

func volume(name string, source map[string]any) map[string]any {
	v := map[string]any{"name": name}
	for k, s := range source {
		v[k] = s
	}
	return v
}

func hostPath(p string) map[string]any {
	return map[string]any{"hostPath": map[string]any{"path": p}}
}

// The secrets advice every refusal of an API object ends with.
const wantValuesAdvice = `Podmin mounts values from the secrets provider instead: list their keys in a podmin.dev/<provider> annotation of the template (podmin.dev/aws-parameter-store also holds plain configuration), create each with "podmin secret create KEY --for web --namespace product", and read it from /var/run/podmin/<provider>/KEY`

// TestExtractRefusesWhatNeedsAnAPIServer: kubelet without an API server
// cannot serve these ("no kubeClient defined"), so a Pod using them would
// never start.
func TestExtractRefusesWhatNeedsAnAPIServer(t *testing.T) {
	env := func(v map[string]any) mutation {
		return set(base+".containers.0.env", []any{map[string]any{"name": "X", "valueFrom": v}})
	}
	fieldRef := func(p string) mutation { return env(map[string]any{"fieldRef": map[string]any{"fieldPath": p}}) }
	vol := func(v map[string]any) mutation { return set(base+".volumes", []any{v}) }
	projected := func(src map[string]any) mutation {
		return vol(volume("p", map[string]any{"projected": map[string]any{"sources": []any{src}}}))
	}
	runExtractCases(t, []extractCase{
		{name: "configMap volume", in: ds(vol(volume("cfg", map[string]any{"configMap": map[string]any{"name": "app"}}))),
			want: "DaemonSet spec.template.spec.volumes[0].configMap: not supported: a ConfigMap is read from the Kubernetes API, which Podmin does not have, so kubelet would never start the Pod (no kubeClient defined); " + wantValuesAdvice},
		{name: "secret volume", in: ds(vol(volume("s", map[string]any{"secret": map[string]any{"secretName": "app"}}))),
			want: "DaemonSet spec.template.spec.volumes[0].secret: not supported: a Secret is read from the Kubernetes API, which Podmin does not have, so kubelet would never start the Pod (no kubeClient defined); " + wantValuesAdvice},
		{name: "persistentVolumeClaim", in: ds(vol(volume("data", map[string]any{"persistentVolumeClaim": map[string]any{"claimName": "data"}}))),
			want: "DaemonSet spec.template.spec.volumes[0].persistentVolumeClaim: not supported: a PersistentVolumeClaim is bound through the Kubernetes API, which Podmin does not have; use an emptyDir, or keep the state outside the node"},
		{name: "ephemeral volume", in: ds(vol(volume("scratch", map[string]any{"ephemeral": map[string]any{}}))),
			want: "DaemonSet spec.template.spec.volumes[0].ephemeral: not supported: an ephemeral volume is a PersistentVolumeClaim made through the Kubernetes API, which Podmin does not have; use an emptyDir"},
		{name: "csi volume", in: ds(vol(volume("c", map[string]any{"csi": map[string]any{"driver": "secrets-store.csi.k8s.io"}}))),
			want: "DaemonSet spec.template.spec.volumes[0].csi: not supported: Podmin nodes run no CSI driver, and kubelet reads CSI drivers from the Kubernetes API, which Podmin does not have; " + wantValuesAdvice},
		{name: "projected service account token", in: ds(projected(map[string]any{"serviceAccountToken": map[string]any{"path": "token"}})),
			want: "DaemonSet spec.template.spec.volumes[0].projected.sources[0].serviceAccountToken: not supported: service account tokens are issued by the Kubernetes API, which Podmin does not have; the Pod's workload identity authenticates it instead: tls.crt, tls.key and ca.crt at /var/run/secrets/podmin.dev/tls, with the SPIFFE ID spiffe://<cluster>.podmin.internal/ns/product/pod/web"},
		{name: "projected configMap", in: ds(projected(map[string]any{"configMap": map[string]any{"name": "app"}})),
			want: "DaemonSet spec.template.spec.volumes[0].projected.sources[0].configMap: not supported: a ConfigMap is read from the Kubernetes API, which Podmin does not have, so kubelet would never start the Pod (no kubeClient defined); " + wantValuesAdvice},
		{name: "projected cluster trust bundle", in: ds(projected(map[string]any{"clusterTrustBundle": map[string]any{"path": "ca.crt", "name": "x"}})),
			want: "DaemonSet spec.template.spec.volumes[0].projected.sources[0].clusterTrustBundle: not supported: a ClusterTrustBundle is read from the Kubernetes API, which Podmin does not have; the workload CA is in ca.crt at /var/run/secrets/podmin.dev/tls"},
		{name: "projected downward API", in: ds(projected(map[string]any{"downwardAPI": map[string]any{"items": []any{map[string]any{"path": "name", "fieldRef": map[string]any{"fieldPath": "metadata.name"}}}}}))},
		{name: "envFrom configMapRef", in: ds(set(base+".containers.0.envFrom", []any{map[string]any{"configMapRef": map[string]any{"name": "app"}}})),
			want: "DaemonSet spec.template.spec.containers[0].envFrom[0].configMapRef: not supported: a ConfigMap is read from the Kubernetes API, which Podmin does not have, so kubelet would never start the Pod (no kubeClient defined); " + wantValuesAdvice},
		{name: "envFrom secretRef in an init container", in: ds(set(base+".initContainers", []any{map[string]any{"name": "init", "image": "hello:v1", "envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "app", "optional": true}}}}})),
			want: "DaemonSet spec.template.spec.initContainers[0].envFrom[0].secretRef: not supported: a Secret is read from the Kubernetes API, which Podmin does not have, so kubelet would never start the Pod (no kubeClient defined), even when optional; " + wantValuesAdvice},
		{name: "configMapKeyRef", in: ds(env(map[string]any{"configMapKeyRef": map[string]any{"name": "app", "key": "k"}})),
			want: "DaemonSet spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef: not supported: a ConfigMap is read from the Kubernetes API, which Podmin does not have, so kubelet would never start the Pod (no kubeClient defined); " + wantValuesAdvice},
		{name: "secretKeyRef", in: ds(env(map[string]any{"secretKeyRef": map[string]any{"name": "app", "key": "k"}})),
			want: "DaemonSet spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef: not supported: a Secret is read from the Kubernetes API, which Podmin does not have, so kubelet would never start the Pod (no kubeClient defined); " + wantValuesAdvice},
		{name: "fieldRef metadata.name", in: ds(fieldRef("metadata.name"))},
		{name: "fieldRef metadata.namespace", in: ds(fieldRef("metadata.namespace"))},
		{name: "fieldRef metadata.uid", in: ds(fieldRef("metadata.uid"))},
		{name: "fieldRef status.podIP", in: ds(fieldRef("status.podIP"))},
		{name: "fieldRef status.podIPs", in: ds(fieldRef("status.podIPs"))},
		{name: "fieldRef status.hostIP", in: ds(fieldRef("status.hostIP"))},
		{name: "fieldRef spec.nodeName", in: ds(fieldRef("spec.nodeName"))},
		{name: "fieldRef label", in: ds(fieldRef("metadata.labels['app']"))},
		{name: "fieldRef annotation", in: ds(fieldRef("metadata.annotations['podmin.dev/revision']"))},
		{name: "fieldRef all labels", in: ds(fieldRef("metadata.labels")),
			want: `DaemonSet spec.template.spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: "metadata.labels" cannot be resolved by kubelet for a static Pod, which would then never start: use metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'], metadata.annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP or status.podIPs`},
		{name: "fieldRef status.phase", in: ds(fieldRef("status.phase")),
			want: `DaemonSet spec.template.spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: "status.phase" cannot be resolved by kubelet for a static Pod, which would then never start: use metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'], metadata.annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP or status.podIPs`},
		{name: "fieldRef apiVersion", in: ds(env(map[string]any{"fieldRef": map[string]any{"apiVersion": "v2", "fieldPath": "metadata.name"}})),
			want: `DaemonSet spec.template.spec.containers[0].env[0].valueFrom.fieldRef.apiVersion: "v2" is not supported: omit it or use v1`},
		{name: "resourceFieldRef", in: ds(env(map[string]any{"resourceFieldRef": map[string]any{"resource": "limits.memory"}}))},
		{name: "serviceAccountName default", in: ds(set(base+".serviceAccountName", "default"))},
		{name: "serviceAccountName", in: ds(set(base+".serviceAccountName", "app")),
			want: `DaemonSet spec.template.spec.serviceAccountName: "app" is not supported: service accounts live in the Kubernetes API, which Podmin does not have; remove it: the Pod's workload identity at /var/run/secrets/podmin.dev/tls authenticates it`},
		{name: "serviceAccount", in: ds(set(base+".serviceAccount", "app")),
			want: `DaemonSet spec.template.spec.serviceAccount: "app" is not supported: service accounts live in the Kubernetes API, which Podmin does not have; remove it: the Pod's workload identity at /var/run/secrets/podmin.dev/tls authenticates it`},
		{name: "automount token", in: ds(set(base+".automountServiceAccountToken", true)),
			want: "DaemonSet spec.template.spec.automountServiceAccountToken: not supported: service account tokens are issued by the Kubernetes API, which Podmin does not have; remove it or set it to false: the Pod's workload identity at /var/run/secrets/podmin.dev/tls authenticates it"},
		{name: "automount token off", in: ds(set(base+".automountServiceAccountToken", false))},
	})
}

// TestExtractRefusesPodminHostPaths: a hostPath into Podmin's own node
// directories would hand a Pod other Pods' identities and secrets, or the
// static Pod files.
func TestExtractRefusesPodminHostPaths(t *testing.T) {
	vol := func(p string) []byte {
		return ds(set(base+".volumes", []any{volume("h", hostPath(p))}))
	}
	const field = "DaemonSet spec.template.spec.volumes[0].hostPath.path: "
	const mounts = "; the Pod's own identity is mounted at /var/run/secrets/podmin.dev/tls and its secrets at /var/run/podmin/<provider>/<key>"
	runExtractCases(t, []extractCase{
		{name: "root", in: vol("/"), want: field + `"/" is the whole node: it holds every Pod's identity keys and secret values and Podmin's own state, so a Pod may not mount it; mount only the directories the Pod needs`},
		{name: "root spelled otherwise", in: vol("//."), want: field + `"//." is the whole node: it holds every Pod's identity keys and secret values and Podmin's own state, so a Pod may not mount it; mount only the directories the Pod needs`},
		{name: "another Pod's identity", in: vol("/run/podmin/workloads/db/identity"), want: field + `"/run/podmin/workloads/db/identity" is the workload identity of Pod "db": identity is mounted only into its own Pod` + mounts},
		{name: "workloads", in: vol("/run/podmin/workloads"), want: field + `"/run/podmin/workloads" reaches /run/podmin, which holds every Pod's workload identity and secret values: a Pod may not mount it` + mounts},
		{name: "secret values", in: vol("/var/run/podmin/aws-parameter-store"), want: field + `"/var/run/podmin/aws-parameter-store" reaches /var/run/podmin, which holds every Pod's workload identity and secret values: a Pod may not mount it` + mounts},
		{name: "static Pod directory", in: vol("/etc/podmin/manifests"), want: field + `"/etc/podmin/manifests" reaches /etc/podmin, which holds the static Pod files kubelet runs: a Pod may not mount it` + mounts},
		{name: "agent state", in: vol("/var/lib/podmin/"), want: field + `"/var/lib/podmin/" reaches /var/lib/podmin, which holds the node agent's state: a Pod may not mount it` + mounts},
		{name: "a parent of Podmin's directories", in: vol("/etc"), want: field + `"/etc" reaches /etc/podmin, which holds the static Pod files kubelet runs: a Pod may not mount it` + mounts},
		{name: "a climb into them", in: vol("/srv/../run/podmin"), want: field + `"/srv/../run/podmin" reaches /run/podmin, which holds every Pod's workload identity and secret values: a Pod may not mount it` + mounts},
		{name: "a sibling", in: vol("/run/podmin-apps")},
		{name: "elsewhere in /etc", in: vol("/etc/podmin-apps/envoy")},
		{name: "the exact identity volume", in: ds(set(base+".volumes", []any{map[string]any{"name": IdentityVolume, "hostPath": map[string]any{"path": IdentityHostPath("web"), "type": "Directory"}}}))},
	})
}

// TestExtractWarnsOnHostAccess: privileged settings and host access are
// accepted, never silently: each is a warning naming the field.
func TestExtractWarnsOnHostAccess(t *testing.T) {
	in := ds(
		set(base+".hostNetwork", true), set(base+".hostPID", true), set(base+".hostIPC", true),
		set(base+".volumes", []any{volume("logs", hostPath("/var/log")), volume("tmp", map[string]any{"emptyDir": map[string]any{}})}),
		set(base+".initContainers", []any{map[string]any{"name": "setup", "image": "hello:v1", "securityContext": map[string]any{"privileged": true}}}),
		set(base+".containers.0.securityContext", map[string]any{"privileged": false, "capabilities": map[string]any{"add": []any{"NET_ADMIN", "SYS_TIME"}, "drop": []any{"ALL"}}}),
		set(base+".containers.0.ports", []any{map[string]any{"containerPort": 8080, "hostPort": 80}}),
	)
	r, err := Extract(in, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"DaemonSet spec.template.spec.hostNetwork: the Pod shares the node's network: it can bind and reach everything the node can, past the Service dataplane",
		"DaemonSet spec.template.spec.hostPID: the Pod sees and can signal every process of the node, other Pods' included",
		"DaemonSet spec.template.spec.hostIPC: the Pod shares the node's IPC namespace (shared memory, semaphores) with every process of the node",
		`DaemonSet spec.template.spec.volumes[0].hostPath.path: mounts the node's "/var/log" into the Pod`,
		"DaemonSet spec.template.spec.initContainers[0].securityContext.privileged: the container runs privileged, with every capability and the node's devices",
		`DaemonSet spec.template.spec.containers[0].securityContext.capabilities.add: the container gains capabilities ["NET_ADMIN" "SYS_TIME"]`,
		"DaemonSet spec.template.spec.containers[0].ports[0].hostPort: the container listens on port 80 of the node's own address",
	}
	var got []string
	for _, w := range r.Warnings {
		got = append(got, w.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The minimal manifest warns about nothing.
	if r, err := Extract(ds(), ExtractOptions{}); err != nil || len(r.Warnings) != 0 {
		t.Fatalf("plain manifest: %v %v", r.Warnings, err)
	}
}
