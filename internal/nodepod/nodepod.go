// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package nodepod

import (
	"cmp"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/state"
)

// Node paths, relative to the node's root.
const (
	// ManifestsDir is the exclusively Podmin-owned static Pod directory
	// kubelet watches; every *.yaml in it is Podmin's.
	ManifestsDir = "/etc/podmin/manifests"
	// WorkloadsDir is the tmpfs tree the static-Pod reconciler owns.
	WorkloadsDir = "/run/podmin/workloads"
	// MountDir is where a provider's values appear inside a container:
	// /var/run/podmin/<provider>/<key>.
	MountDir = "/var/run/podmin"
	// RevisionAnnotation carries the deployment's revision, derived from
	// its Pod and Service payload digests, so kubelet restarts the static
	// Pod exactly when its committed desired state changes.
	RevisionAnnotation = "podmin.dev/revision"
	// IncarnationAnnotation tells apart the times a node runs one
	// revision: kubelet names a static Pod by a hash of its file, so a Pod
	// rolled back to a revision it ran before would otherwise be the same
	// Pod to kubelet, which then counts the old run's containers as
	// restarts of the new one.
	IncarnationAnnotation = "podmin.dev/incarnation"
	// volumePrefix names the per-provider volumes, podmin-<provider>.
	volumePrefix = "podmin-"
)

// ErrInvalidPayload reports a verified payload that still cannot become a
// static Pod (it does not decode, or it names another Pod).
var ErrInvalidPayload = errors.New("invalid Pod payload")

// FileName is the static Pod file of a Pod: <pod>.yaml.
func FileName(pod string) string { return pod + ".yaml" }

// SecretsHostDir is the host directory holding a Pod's values of one
// provider, mounted read-only at MountDir/<provider>.
func SecretsHostDir(pod, provider string) string {
	return WorkloadsDir + "/" + pod + "/secrets/" + provider
}

// Revision is the value of podmin.dev/revision for an index entry: the
// first 128 bits of SHA-512 over the Pod and Service payload paths, which
// carry their digests. It changes exactly when either payload changes.
func Revision(e state.Entry) string {
	h := sha512.New()
	h.Write([]byte("podmin.dev/revision\x00pod\x00" + e.Pod + "\x00service\x00" + e.Service))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Mount is one provider's values a Pod declares.
type Mount struct {
	// Provider is the podmin.dev/<provider> annotation's provider.
	Provider string
	// Keys are the declared keys in annotation order.
	Keys []string
	// HostDir is SecretsHostDir(pod, Provider), a node path.
	HostDir string
}

// Pod is one transformed static Pod.
type Pod struct {
	// Key is the deployment.
	Key state.Key
	// Name and Namespace are the Pod's (namespace defaulted).
	Name, Namespace string
	// Revision is the podmin.dev/revision value.
	Revision string
	// File is FileName(Name); YAML is its exact content.
	File string
	YAML []byte
	// Mounts lists the declared values by provider, in provider order.
	Mounts []Mount
	// IdentityHostDir is the host path behind the workload identity
	// volume; it must exist before kubelet starts the Pod.
	IdentityHostDir string
}

// Transform turns a deployment's verified Pod payload into its static Pod.
// It adds podmin.dev/revision and, for every podmin.dev/<provider>
// annotation, one read-only hostPath volume mounted at
// /var/run/podmin/<provider> into every regular and init container.
func Transform(key state.Key, entry state.Entry, podYAML []byte) (*Pod, error) {
	return TransformIncarnation(key, entry, podYAML, "")
}

// TransformIncarnation is Transform for one incarnation of the Pod on a
// node: a non-empty incarnation is added as IncarnationAnnotation.
func TransformIncarnation(key state.Key, entry state.Entry, podYAML []byte, incarnation string) (*Pod, error) {
	fail := func(format string, args ...any) (*Pod, error) {
		return nil, fmt.Errorf("%w %s of deployment %s: %s: redeploy it with a current podmin", ErrInvalidPayload, entry.Pod, key, fmt.Sprintf(format, args...))
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(podYAML, &pod); err != nil {
		return fail("decode: %v", err)
	}
	if pod.APIVersion != "v1" || pod.Kind != "Pod" {
		return fail("it is %s %s, not a v1 Pod", pod.APIVersion, pod.Kind)
	}
	if pod.Name != key.Name {
		return fail("it names Pod %q, not %q", pod.Name, key.Name)
	}
	out := &Pod{
		Key: key, Name: pod.Name, Namespace: cmp.Or(pod.Namespace, manifest.DefaultNamespace),
		Revision: Revision(entry), File: FileName(pod.Name), IdentityHostDir: manifest.IdentityHostPath(pod.Name),
	}
	for _, reserved := range []string{RevisionAnnotation, IncarnationAnnotation} {
		if _, ok := pod.Annotations[reserved]; ok {
			return fail("it sets the reserved annotation %s", reserved)
		}
	}
	for _, provider := range manifest.SecretsProviders() {
		value, ok := pod.Annotations["podmin.dev/"+provider]
		if !ok {
			continue
		}
		keys, err := manifest.ParseSecretKeys(value)
		if err != nil {
			return fail("annotation podmin.dev/%s: %v", provider, err)
		}
		m := Mount{Provider: provider, Keys: keys, HostDir: SecretsHostDir(pod.Name, provider)}
		if err := addMount(&pod.Spec, m); err != nil {
			return fail("%v", err)
		}
		out.Mounts = append(out.Mounts, m)
	}
	annotations := maps.Clone(pod.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[RevisionAnnotation] = out.Revision
	if incarnation != "" {
		annotations[IncarnationAnnotation] = incarnation
	}
	pod.Annotations = annotations
	data, err := encode(&pod)
	if err != nil {
		return fail("encode: %v", err)
	}
	out.YAML = data
	return out, nil
}

// addMount adds the provider's read-only hostPath volume and mounts it into
// every container, refusing a manifest that already uses the volume name or
// the mount path for something else.
func addMount(spec *corev1.PodSpec, m Mount) error {
	name := volumePrefix + m.Provider
	mountPath := MountDir + "/" + m.Provider
	if slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
		return fmt.Errorf("volume name %q is reserved for the podmin.dev/%s values: rename that volume", name, m.Provider)
	}
	dir := corev1.HostPathDirectory
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name:         name,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.HostDir, Type: &dir}},
	})
	mount := func(c *corev1.Container) error {
		for _, vm := range c.VolumeMounts {
			p := path.Clean(vm.MountPath)
			if p == mountPath || strings.HasPrefix(p, mountPath+"/") {
				return fmt.Errorf("container %q mounts %s, which overlaps %s where the podmin.dev/%s values appear: choose another path", c.Name, vm.MountPath, mountPath, m.Provider)
			}
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: mountPath, ReadOnly: true})
		return nil
	}
	for i := range spec.InitContainers {
		if err := mount(&spec.InitContainers[i]); err != nil {
			return err
		}
	}
	for i := range spec.Containers {
		if err := mount(&spec.Containers[i]); err != nil {
			return err
		}
	}
	return nil
}

// SecondName is the name of a deployment's second static Pod on a node,
// <pod>.surge: kubelet runs one static Pod of a full name at a time, so a
// maxSurge rollout starts the new revision under this name beside the Pod
// named pod, and the one after it under pod again. A DaemonSet name is a
// DNS label (no dot), so no deployment's own Pod can have it. Its workload
// identity, values and workload directory stay those of pod.
func SecondName(pod string) string { return pod + secondSuffix }

const secondSuffix = ".surge"

// FirstName is the deployment's Pod name of a static Pod named name: name
// itself, or the Pod whose SecondName it is.
func FirstName(name string) string { return strings.TrimSuffix(name, secondSuffix) }

// Rename returns a static Pod file's bytes with metadata.name set to
// name, in the canonical encoding. The reconciler gives a deployment's
// second Pod its SecondName this way, after the workload identity was
// annotated under the deployment's own Pod name.
func Rename(podYAML []byte, name string) ([]byte, error) {
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(podYAML, &pod); err != nil {
		return nil, fmt.Errorf("rename the static Pod to %s: %w", name, err)
	}
	pod.Name = name
	return encode(&pod)
}
