// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Node paths as a node sees them: /run and /var are the node root's.
const (
	containerdSock = "/run/podmin/containerd/containerd.sock"
	podsAPISock    = "/var/lib/kubelet/pods-api/pods-api.sock"
	runscRoot      = "/run/podmin/containerd/runsc"
)

// writeConfigs renders the node's runtime configuration as the bootstrap
// script does (builtins/userdata/aws.sh.tmpl), with this machine's
// differences: the cgroupfs driver (no systemd here), cgroup v1 allowed,
// a cgroup root of the node's own, containerd clamping OOM scores to its
// own (restrict_oom_score_adj, for machines without CAP_SYS_RESOURCE) and
// the gVisor shim behind shimoom.
func (n *node) writeConfigs() {
	etc := filepath.Join(n.root, "etc")
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
`, containerdSock, snapshotter(), etc, n.tools, etc, n.bin, etc),
		"containerd/runsc.toml": fmt.Sprintf("binary_name = '%s/runsc'\nroot = '%s'\n", n.tools, runscRoot),
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
`, podPrefix),
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
`, etc, containerdSock, n.cgroup, nodeAddr, etc),
		"resolv.conf": "nameserver " + vpcAddr.String() + "\n",
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
`, nodeAddr, n.root, nodeAddr, etc),
	}
	for name, content := range files {
		must(n.t, os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644))
	}
}

// snapshotter is overlayfs where the kernel has it, else native.
func snapshotter() string {
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && strings.Contains(string(b), "\toverlay\n") {
		return "overlayfs"
	}
	return "native"
}

// daemon is one long-running process of the node, logging to a file.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs a daemon of the node; the test stops it at the end.
func (n *node) start(name string, env []string, argv ...string) *daemon {
	n.t.Helper()
	d := &daemon{name: name, log: filepath.Join(n.logs, name+".log"), done: make(chan struct{})}
	f, err := os.Create(d.log)
	must(n.t, err)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		n.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		d.err = d.cmd.Wait()
		f.Close()
		close(d.done)
	}()
	n.procs = append(n.procs, d)
	return d
}

// stop sends SIGTERM and waits up to limit, then kills.
func (d *daemon) stop(limit time.Duration) error {
	select {
	case <-d.done:
		return fmt.Errorf("%s had already exited: %v", d.name, d.err)
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return nil
	case <-time.After(limit):
		_ = d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM: killed", d.name, limit)
	}
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// tail is the end of a daemon's log, for failure messages.
func (d *daemon) tail() string {
	s := d.logText()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return fmt.Sprintf("--- %s (%s) ---\n%s", d.name, d.log, s)
}

// stopAll stops the daemons in reverse start order.
func (n *node) stopAll() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		if err := n.procs[i].stop(30 * time.Second); err != nil {
			n.t.Errorf("stop: %v", err)
		}
	}
	n.procs = nil
}

// waitFor polls cond until it holds; on timeout t fails with the logs of
// every daemon.
func (n *node) waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			var logs []string
			for _, d := range n.procs {
				logs = append(logs, d.tail())
			}
			t.Fatalf("not within %s: %s\n%s", limit, what, strings.Join(logs, "\n"))
		}
		for _, d := range n.procs {
			if d.exited() {
				t.Fatalf("%s exited (%v) while waiting for %s\n%s", d.name, d.err, what, d.tail())
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

func (n *node) startContainerd() {
	n.start("containerd", []string{"PODMIN_RUNSC_SHIM=" + filepath.Join(n.tools, "containerd-shim-runsc-v1"),
		"PODMIN_SHIMOOM_LOG=" + filepath.Join(n.logs, "shimoom.log")},
		filepath.Join(n.tools, "containerd"), "--config", filepath.Join(n.root, "etc/containerd/config.toml"))
	n.waitFor(n.t, time.Minute, "containerd's socket", func() bool { return isSocket(containerdSock) })
}

func (n *node) startKubelet() {
	n.start("kubelet", nil, filepath.Join(n.tools, "kubelet"), "--config", filepath.Join(n.root, "etc/kubernetes/kubelet.yaml"),
		"--hostname-override", nodeName, "--node-ip", nodeAddr.String(), "--v=2")
	n.waitFor(n.t, 2*time.Minute, "kubelet's Pods API socket", func() bool { return isSocket(podsAPISock) })
}

// agent is podmin-agent's daemon.
func (n *node) agent() *daemon { return n.daemon("podmin-agent") }

func (n *node) daemon(name string) *daemon {
	for _, d := range n.procs {
		if d.name == name {
			return d
		}
	}
	n.t.Fatalf("no daemon %s", name)
	return nil
}

func (n *node) startAgent() {
	env := append(slices.Clone(n.xdg), "PODMIN_ROOT="+n.root, "PODMIN_AGENT_DATAPLANE=on",
		"PODMIN_AGENT_NODE_ADDR="+nodeAddr.String(), "PODMIN_AGENT_NODE_ID=e2e-node")
	d := n.start("podmin-agent", env, filepath.Join(n.bin, "podmin-agent"), "--provider", "local", "--bucket", n.bucket,
		"--region", "local", "--cluster", cluster, "--nodegroup", nodegroup, "--ipv6-prefix", podPrefix.String())
	n.waitFor(n.t, time.Minute, "the agent's health endpoints and Service DNS", func() bool {
		l := d.logText()
		return strings.Contains(l, "serving health endpoints") && strings.Contains(l, "serving service DNS")
	})
}

func (n *node) startCoreDNS() {
	n.start("coredns", nil, filepath.Join(n.tools, "coredns"), "-conf", filepath.Join(n.root, "etc/coredns/Corefile"))
	n.waitFor(n.t, time.Minute, "CoreDNS answering the cluster domain from the agent's zone file", func() bool {
		_, rcode, err := lookup(net.JoinHostPort(nodeAddr.String(), "53"), "nothing.default.svc.cluster.local")
		return err == nil && rcode == dns.RcodeNameError
	})
}
