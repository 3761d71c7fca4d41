// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"path"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/internal/scrub"
)

const (
	// IdentityVolume is the reserved name of the workload identity volume
	// that Extract adds to every Pod.
	IdentityVolume = "podmin-identity"
	// IdentityMountPath is where every regular and init container reads
	// tls.crt, tls.key and ca.crt.
	IdentityMountPath = "/var/run/secrets/podmin.dev/tls"
)

// IdentityHostPath is the host directory behind the identity volume: the
// agent's relative "identity" symlink that atomically selects the current
// generation beneath /run/podmin/workloads/<pod>/identity-generations.
func IdentityHostPath(pod string) string {
	return "/run/podmin/workloads/" + pod + "/identity"
}

func identityVolume(pod string) corev1.Volume {
	// Directory, not DirectoryOrCreate: kubelet must wait for the agent's
	// symlink rather than create an empty directory in its place.
	t := corev1.HostPathDirectory
	return corev1.Volume{
		Name: IdentityVolume,
		VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: IdentityHostPath(pod), Type: &t},
		},
	}
}

// isIdentityMount reports whether m is exactly the reserved mount.
func isIdentityMount(m corev1.VolumeMount) bool {
	return reflect.DeepEqual(m, corev1.VolumeMount{Name: IdentityVolume, MountPath: IdentityMountPath, ReadOnly: true})
}

// addIdentity adds the identity volume and its read-only mount to every
// regular and init container, keeping an exact existing copy of either and
// rejecting any other use of the reserved volume name or mount path.
func addIdentity(p *problems, spec *corev1.PodSpec, pod string) {
	const base = "spec.template.spec"
	want := identityVolume(pod)
	haveVolume := false
	for i, v := range spec.Volumes {
		if v.Name != IdentityVolume {
			continue
		}
		if !reflect.DeepEqual(v, want) {
			p.add(subjectDaemonSet, fmt.Sprintf("%s.volumes[%d].name", base, i), "%q is reserved for the workload identity volume that Podmin adds; rename this volume", IdentityVolume)
			continue
		}
		haveVolume = true
	}
	mountIdentity := func(field string, c *corev1.Container) {
		have := false
		for j, m := range c.VolumeMounts {
			mp := path.Clean(m.MountPath)
			switch {
			case isIdentityMount(m):
				have = true
			case m.Name == IdentityVolume:
				p.add(subjectDaemonSet, fmt.Sprintf("%s.volumeMounts[%d]", field, j), "volume %q may only be mounted read-only at exactly %s, without subPath or propagation; remove this mount, Podmin adds it", IdentityVolume, IdentityMountPath)
			case mp == IdentityMountPath || strings.HasPrefix(mp, IdentityMountPath+"/"):
				p.add(subjectDaemonSet, fmt.Sprintf("%s.volumeMounts[%d].mountPath", field, j), "%s is reserved for the workload identity mount; choose another path", scrub.Quote(m.MountPath))
			}
		}
		if !have {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: IdentityVolume, MountPath: IdentityMountPath, ReadOnly: true})
		}
	}
	for i := range spec.InitContainers {
		mountIdentity(fmt.Sprintf("%s.initContainers[%d]", base, i), &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		mountIdentity(fmt.Sprintf("%s.containers[%d]", base, i), &spec.Containers[i])
	}
	if !haveVolume {
		spec.Volumes = append(spec.Volumes, want)
	}
}
