// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/internal/scrub"
)

// Warning is a setting Podmin accepts but the operator must know about:
// privileged settings and host access, which give a Pod parts of the node
// every other Pod shares. They are warned about, never silently accepted.
type Warning struct {
	// Subject and Field locate the setting as Error does.
	Subject, Field string
	// Detail says what the setting grants.
	Detail string
}

// String renders "<subject> <field>: <detail>" as Error does.
func (w Warning) String() string {
	return (&Error{Subject: w.Subject, Field: w.Field, Detail: w.Detail}).Error()
}

// warnings collects warnings in the order of the manifest.
type warnings []Warning

func (ws *warnings) add(field, format string, args ...any) {
	*ws = append(*ws, Warning{Subject: subjectDaemonSet, Field: field, Detail: fmt.Sprintf(format, args...)})
}

// noAPI is why a reference to a Kubernetes API object can never be served:
// kubelet has no API server to read it from and fails the Pod.
const noAPI = "is read from the Kubernetes API, which Podmin does not have, so kubelet would never start the Pod (no kubeClient defined)"

// identityNote says what authenticates a Pod instead of a service account.
const identityNote = "the Pod's workload identity at " + IdentityMountPath + " authenticates it"

// checkPodSpec refuses what a Pod can only get from a Kubernetes API
// server, and the host paths into Podmin's own node directories, and
// returns warnings for privileged settings and host access. name and
// namespace are the Pod's, for the advice.
func checkPodSpec(p *problems, spec *corev1.PodSpec, name, namespace string) []Warning {
	const base = "spec.template.spec"
	advice := valuesAdvice(name, namespace)
	var ws warnings
	for _, f := range []struct {
		field, value string
	}{{"serviceAccountName", spec.ServiceAccountName}, {"serviceAccount", spec.DeprecatedServiceAccount}} {
		if f.value != "" && f.value != "default" {
			p.add(subjectDaemonSet, base+"."+f.field, "%s is not supported: service accounts live in the Kubernetes API, which Podmin does not have; remove it: %s", scrub.Quote(f.value), identityNote)
		}
	}
	if a := spec.AutomountServiceAccountToken; a != nil && *a {
		p.add(subjectDaemonSet, base+".automountServiceAccountToken", "not supported: service account tokens are issued by the Kubernetes API, which Podmin does not have; remove it or set it to false: %s", identityNote)
	}
	if spec.HostNetwork {
		ws.add(base+".hostNetwork", "the Pod shares the node's network: it can bind and reach everything the node can, past the Service dataplane")
	}
	if spec.HostPID {
		ws.add(base+".hostPID", "the Pod sees and can signal every process of the node, other Pods' included")
	}
	if spec.HostIPC {
		ws.add(base+".hostIPC", "the Pod shares the node's IPC namespace (shared memory, semaphores) with every process of the node")
	}
	for i, v := range spec.Volumes {
		checkVolume(p, &ws, fmt.Sprintf("%s.volumes[%d]", base, i), v, name, namespace, advice)
	}
	for i := range spec.InitContainers {
		checkContainer(p, &ws, fmt.Sprintf("%s.initContainers[%d]", base, i), &spec.InitContainers[i], advice)
	}
	for i := range spec.Containers {
		checkContainer(p, &ws, fmt.Sprintf("%s.containers[%d]", base, i), &spec.Containers[i], advice)
	}
	return ws
}

// valuesAdvice is what replaces ConfigMaps and Secrets: the values the
// agent mounts from the secrets provider.
func valuesAdvice(name, namespace string) string {
	ns := ""
	if namespace != DefaultNamespace {
		ns = " --namespace " + namespace
	}
	return fmt.Sprintf("Podmin mounts values from the secrets provider instead: list their keys in a podmin.dev/<provider> annotation of the template (podmin.dev/aws-parameter-store also holds plain configuration), create each with \"podmin secret create KEY --for %s%s\", and read it from /var/run/podmin/<provider>/KEY", name, ns)
}

func checkVolume(p *problems, ws *warnings, field string, v corev1.Volume, name, namespace, advice string) {
	switch {
	case v.ConfigMap != nil:
		p.add(subjectDaemonSet, field+".configMap", "not supported: a ConfigMap %s; %s", noAPI, advice)
	case v.Secret != nil:
		p.add(subjectDaemonSet, field+".secret", "not supported: a Secret %s; %s", noAPI, advice)
	case v.PersistentVolumeClaim != nil:
		p.add(subjectDaemonSet, field+".persistentVolumeClaim", "not supported: a PersistentVolumeClaim is bound through the Kubernetes API, which Podmin does not have; use an emptyDir, or keep the state outside the node")
	case v.Ephemeral != nil:
		p.add(subjectDaemonSet, field+".ephemeral", "not supported: an ephemeral volume is a PersistentVolumeClaim made through the Kubernetes API, which Podmin does not have; use an emptyDir")
	case v.CSI != nil:
		p.add(subjectDaemonSet, field+".csi", "not supported: Podmin nodes run no CSI driver, and kubelet reads CSI drivers from the Kubernetes API, which Podmin does not have; %s", advice)
	case v.Projected != nil:
		for j, s := range v.Projected.Sources {
			src := fmt.Sprintf("%s.projected.sources[%d]", field, j)
			switch {
			case s.ConfigMap != nil:
				p.add(subjectDaemonSet, src+".configMap", "not supported: a ConfigMap %s; %s", noAPI, advice)
			case s.Secret != nil:
				p.add(subjectDaemonSet, src+".secret", "not supported: a Secret %s; %s", noAPI, advice)
			case s.ServiceAccountToken != nil:
				p.add(subjectDaemonSet, src+".serviceAccountToken", "not supported: service account tokens are issued by the Kubernetes API, which Podmin does not have; the Pod's workload identity authenticates it instead: tls.crt, tls.key and ca.crt at %s, with the SPIFFE ID spiffe://<cluster>.podmin.internal/ns/%s/pod/%s", IdentityMountPath, namespace, name)
			case s.ClusterTrustBundle != nil:
				p.add(subjectDaemonSet, src+".clusterTrustBundle", "not supported: a ClusterTrustBundle is read from the Kubernetes API, which Podmin does not have; the workload CA is in ca.crt at %s", IdentityMountPath)
			case s.PodCertificate != nil:
				p.add(subjectDaemonSet, src+".podCertificate", "not supported: Pod certificates are issued through the Kubernetes API, which Podmin does not have; the Pod's workload certificate is tls.crt and tls.key at %s", IdentityMountPath)
			}
		}
	case v.HostPath != nil && v.Name != IdentityVolume:
		// The reserved identity volume is addIdentity's to judge.
		checkHostPath(p, ws, field+".hostPath.path", v.HostPath.Path)
	}
}

// podminDirs are the node directories that belong to Podmin, and what
// each holds. /var/run is /run on the nodes, but either may be written.
var podminDirs = []struct{ dir, holds string }{
	{"/run/podmin", "every Pod's workload identity and secret values"},
	{"/var/run/podmin", "every Pod's workload identity and secret values"},
	{"/etc/podmin", "the static Pod files kubelet runs"},
	{"/var/lib/podmin", "the node agent's state"},
}

// identityDirRE matches a Pod's workload identity directory on the node.
var identityDirRE = regexp.MustCompile(`^/(?:var/)?run/podmin/workloads/([^/]+)(?:/|$)`)

// checkHostPath refuses a host path that is, contains or lies inside one
// of Podmin's node directories, or the whole node, and warns about any
// other.
func checkHostPath(p *problems, ws *warnings, field, hostPath string) {
	clean := path.Clean("/" + hostPath)
	const mounts = "; the Pod's own identity is mounted at " + IdentityMountPath + " and its secrets at /var/run/podmin/<provider>/<key>"
	if clean == "/" {
		p.add(subjectDaemonSet, field, "%s is the whole node: it holds every Pod's identity keys and secret values and Podmin's own state, so a Pod may not mount it; mount only the directories the Pod needs", scrub.Quote(hostPath))
		return
	}
	if m := identityDirRE.FindStringSubmatch(clean); m != nil {
		p.add(subjectDaemonSet, field, "%s is the workload identity of Pod %s: identity is mounted only into its own Pod%s", scrub.Quote(hostPath), scrub.Quote(m[1]), mounts)
		return
	}
	for _, d := range podminDirs {
		if within(clean, d.dir) || within(d.dir, clean) {
			p.add(subjectDaemonSet, field, "%s reaches %s, which holds %s: a Pod may not mount it%s", scrub.Quote(hostPath), d.dir, d.holds, mounts)
			return
		}
	}
	ws.add(field, "mounts the node's %s into the Pod", scrub.Quote(hostPath))
}

// within reports whether the clean absolute path p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// envFieldPaths are the fieldRef paths kubelet resolves for a container's
// environment from the static Pod alone (kubelet's
// podFieldSelectorRuntimeValue, within what its validation admits).
var envFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}

// subscriptedFieldRE matches metadata.labels['KEY'] and
// metadata.annotations['KEY'], which kubelet reads from the Pod itself.
var subscriptedFieldRE = regexp.MustCompile(`^metadata\.(labels|annotations)\['[^']+'\]$`)

func checkContainer(p *problems, ws *warnings, field string, c *corev1.Container, advice string) {
	for j, e := range c.EnvFrom {
		f := fmt.Sprintf("%s.envFrom[%d]", field, j)
		switch {
		case e.ConfigMapRef != nil:
			p.add(subjectDaemonSet, f+".configMapRef", "not supported: a ConfigMap %s%s; %s", noAPI, evenOptional(e.ConfigMapRef.Optional), advice)
		case e.SecretRef != nil:
			p.add(subjectDaemonSet, f+".secretRef", "not supported: a Secret %s%s; %s", noAPI, evenOptional(e.SecretRef.Optional), advice)
		}
	}
	for j, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		f := fmt.Sprintf("%s.env[%d].valueFrom", field, j)
		switch v := e.ValueFrom; {
		case v.ConfigMapKeyRef != nil:
			p.add(subjectDaemonSet, f+".configMapKeyRef", "not supported: a ConfigMap %s%s; %s", noAPI, evenOptional(v.ConfigMapKeyRef.Optional), advice)
		case v.SecretKeyRef != nil:
			p.add(subjectDaemonSet, f+".secretKeyRef", "not supported: a Secret %s%s; %s", noAPI, evenOptional(v.SecretKeyRef.Optional), advice)
		case v.FieldRef != nil:
			checkFieldRef(p, f+".fieldRef", v.FieldRef)
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.Privileged != nil && *sc.Privileged {
			ws.add(field+".securityContext.privileged", "the container runs privileged, with every capability and the node's devices")
		}
		if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
			ws.add(field+".securityContext.capabilities.add", "the container gains capabilities %q", sc.Capabilities.Add)
		}
	}
	for j, port := range c.Ports {
		if port.HostPort != 0 {
			ws.add(fmt.Sprintf("%s.ports[%d].hostPort", field, j), "the container listens on port %d of the node's own address", port.HostPort)
		}
	}
}

func evenOptional(optional *bool) string {
	if optional != nil && *optional {
		return ", even when optional"
	}
	return ""
}

// checkFieldRef refuses a fieldRef kubelet cannot resolve for a static
// Pod: kubelet rejects the Pod file, and the Pod never starts.
func checkFieldRef(p *problems, field string, ref *corev1.ObjectFieldSelector) {
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		p.add(subjectDaemonSet, field+".apiVersion", "%s is not supported: omit it or use v1", scrub.Quote(ref.APIVersion))
		return
	}
	for _, ok := range envFieldPaths {
		if ref.FieldPath == ok {
			return
		}
	}
	if subscriptedFieldRE.MatchString(ref.FieldPath) {
		return
	}
	p.add(subjectDaemonSet, field+".fieldPath", "%s cannot be resolved by kubelet for a static Pod, which would then never start: use metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'], metadata.annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP or status.podIPs", scrub.Quote(ref.FieldPath))
}
