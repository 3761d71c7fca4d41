// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import "testing"

func TestExtractIdentity(t *testing.T) {
	exact := map[string]any{"name": IdentityVolume, "mountPath": IdentityMountPath, "readOnly": true}
	mounts := func(ms ...any) mutation { return set(base+".containers.0.volumeMounts", ms) }
	vol := func(v map[string]any) mutation { return set(base+".volumes", []any{v}) }
	runExtractCases(t, []extractCase{
		{name: "exact mount kept", in: ds(mounts(exact))},
		{name: "exact volume kept", in: ds(vol(map[string]any{"name": IdentityVolume, "hostPath": map[string]any{"path": "/run/podmin/workloads/web/identity", "type": "Directory"}}))},
		{name: "other mounts beside it", in: ds(mounts(map[string]any{"name": "certs", "mountPath": "/var/run/secrets"}), vol(map[string]any{"name": "certs", "emptyDir": map[string]any{}}))},
		{name: "volume name taken", in: ds(vol(map[string]any{"name": IdentityVolume, "emptyDir": map[string]any{}})), want: `DaemonSet spec.template.spec.volumes[0].name: "podmin-identity" is reserved for the workload identity volume that Podmin adds; rename this volume`},
		{name: "mount writable", in: ds(mounts(map[string]any{"name": IdentityVolume, "mountPath": IdentityMountPath})), want: `DaemonSet spec.template.spec.containers[0].volumeMounts[0]: volume "podmin-identity" may only be mounted read-only at exactly /var/run/secrets/podmin.dev/tls, without subPath or propagation; remove this mount, Podmin adds it`},
		{name: "mount elsewhere", in: ds(mounts(map[string]any{"name": IdentityVolume, "mountPath": "/tls", "readOnly": true})), want: `DaemonSet spec.template.spec.containers[0].volumeMounts[0]: volume "podmin-identity" may only be mounted read-only at exactly /var/run/secrets/podmin.dev/tls, without subPath or propagation; remove this mount, Podmin adds it`},
		{name: "path taken", in: ds(mounts(map[string]any{"name": "certs", "mountPath": IdentityMountPath + "/"}), vol(map[string]any{"name": "certs", "emptyDir": map[string]any{}})), want: `DaemonSet spec.template.spec.containers[0].volumeMounts[0].mountPath: "/var/run/secrets/podmin.dev/tls/" is reserved for the workload identity mount; choose another path`},
		{name: "path below taken", in: ds(set(base+".initContainers", []any{map[string]any{"name": "init", "image": "busybox", "volumeMounts": []any{map[string]any{"name": "certs", "mountPath": IdentityMountPath + "/extra"}}}}), vol(map[string]any{"name": "certs", "emptyDir": map[string]any{}})), want: `DaemonSet spec.template.spec.initContainers[0].volumeMounts[0].mountPath: "/var/run/secrets/podmin.dev/tls/extra" is reserved for the workload identity mount; choose another path`},
	})
	r, err := Extract(ds(mounts(exact)), ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Pod.Spec.Containers[0].VolumeMounts); n != 1 {
		t.Errorf("exact mount duplicated: %d mounts", n)
	}
}
