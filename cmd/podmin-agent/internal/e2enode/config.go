// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2enode

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Node paths as a node sees them: its /run and /var are its root's.
const (
	ContainerdSock = "/run/podmin/containerd/containerd.sock"
	PodsAPISock    = "/var/lib/kubelet/pods-api/pods-api.sock"
	RunscRoot      = "/run/podmin/containerd/runsc"
)

// Config is one node: its name, where its files live, and its network.
type Config struct {
	// Name is kubelet's node name, which names its static Pods
	// (<pod>-<name>): a DNS subdomain.
	Name string
	// Root is the node root: its /run and /var are Root's run and var.
	Root string
	// Tools holds kubelet, containerd, runsc, the CNI plugins and
	// CoreDNS; Bin the test's programs (shimoom among them).
	Tools, Bin string
	// Addr is the node's address: kubelet's node IP, the Pods' DNS
	// server and CoreDNS's.
	Addr netip.Addr
	// Resolver is the upstream name server in the node's resolv.conf.
	Resolver netip.Addr
	// PodPrefix is the /80 the CNI plugins allocate Pod addresses from.
	PodPrefix netip.Prefix
	// Cgroup is kubelet's cgroup root, e.g. /podmin-e2e-123.
	Cgroup string
}

// HostPath is a node path (such as ContainerdSock) as the machine sees it:
// beneath the node root.
func (c Config) HostPath(nodePath string) string { return filepath.Join(c.Root, nodePath) }

// WriteConfigs renders the node's runtime configuration as the bootstrap
// script does (builtins/userdata/aws.sh.tmpl), with this machine's
// differences: the cgroupfs driver (no systemd here), cgroup v1 allowed,
// a cgroup root of the node's own, containerd clamping OOM scores to its
// own (restrict_oom_score_adj, for machines without CAP_SYS_RESOURCE) and
// the gVisor shim behind shimoom.
func WriteConfigs(c Config) error {
	etc := filepath.Join(c.Root, "etc")
	files := map[string]string{
		"containerd/config.toml": fmt.Sprintf(`version = 3
root = '/var/lib/containerd'
state = '/run/podmin/containerd/state'
[grpc]
  address = '%s'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = '%s'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.podmin.internal/apps/pause:e2e'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '%s/containerd/certs.d'
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['%s/cni']
    conf_dir = '%s/cni/net.d'
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runsc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]
      runtime_type = 'io.containerd.runsc.v1'
      runtime_path = '%s/shimoom'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc.options]
        TypeUrl = 'io.containerd.runsc.v1.options'
        ConfigPath = '%s/containerd/runsc.toml'
`, ContainerdSock, Snapshotter(), etc, c.Tools, etc, c.Bin, etc),
		"containerd/runsc.toml": fmt.Sprintf("binary_name = '%s/runsc'\nroot = '%s'\n", c.Tools, RunscRoot),
		"containerd/certs.d/registry.podmin.internal/hosts.toml": `server = 'http://127.0.0.1:5000'
[host.'http://127.0.0.1:5000']
  capabilities = ['pull', 'resolve']
`,
		"cni/net.d/10-podmin.conflist": fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "podmin",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "%s"}]],
        "routes": [{"dst": "::/0"}]
      }
    }
  ]
}
`, c.PodPrefix),
		"kubernetes/kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s/podmin/manifests
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
address: '::1'
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS:
  - '%s'
resolvConf: %s/resolv.conf
featureGates:
  PodsAPI: true
kubeReserved:
  cpu: 100m
  memory: 128Mi
systemReserved:
  cpu: 100m
  memory: 96Mi
enforceNodeAllocatable:
  - pods
`, etc, ContainerdSock, c.Cgroup, c.Addr, etc),
		"resolv.conf": "nameserver " + c.Resolver.String() + "\n",
		"coredns/Corefile": fmt.Sprintf(`cluster.local:53 {
  bind %s
  file %s/var/lib/podmin/dns/cluster.local.zone {
    reload 1s
  }
  errors
}
.:53 {
  bind %s
  forward . %s/resolv.conf
  cache 30
}
`, c.Addr, c.Root, c.Addr, etc),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Snapshotter is overlayfs where the kernel has it, else native.
func Snapshotter() string {
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && strings.Contains(string(b), "\toverlay\n") {
		return "overlayfs"
	}
	return "native"
}

// ContainerdArgs and ContainerdEnv start containerd with the node's
// configuration, its runsc shim behind shimoom, which logs the OOM-score
// writes it forgives to logs/shimoom.log.
func ContainerdArgs(c Config) []string {
	return []string{filepath.Join(c.Tools, "containerd"), "--config", filepath.Join(c.Root, "etc/containerd/config.toml")}
}

// ContainerdEnv is containerd's environment beyond the test's own.
func ContainerdEnv(c Config, logs string) []string {
	return []string{"PODMIN_RUNSC_SHIM=" + filepath.Join(c.Tools, "containerd-shim-runsc-v1"),
		"PODMIN_SHIMOOM_LOG=" + filepath.Join(logs, "shimoom.log")}
}

// KubeletArgs starts kubelet with the node's configuration.
func KubeletArgs(c Config) []string {
	return []string{filepath.Join(c.Tools, "kubelet"), "--config", filepath.Join(c.Root, "etc/kubernetes/kubelet.yaml"),
		"--hostname-override", c.Name, "--node-ip", c.Addr.String(), "--v=2"}
}

// CoreDNSArgs starts CoreDNS with the node's Corefile.
func CoreDNSArgs(c Config) []string {
	return []string{filepath.Join(c.Tools, "coredns"), "-conf", filepath.Join(c.Root, "etc/coredns/Corefile")}
}

// ToolNames are the programs make node-tools builds for a node, beneath
// Config.Tools.
var ToolNames = []string{"kubelet", "containerd", "ctr", "runsc", "containerd-shim-runsc-v1", "coredns",
	"cni/ptp", "cni/host-local", "cni/loopback"}
