// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// secretMount: the value is readable in the web container, absent from the
// probe container, and on the machine only in the provider's store and the
// node's tmpfs file that is mounted into web.
func (r *run) secretMount(p *e2enode.Proof) {
	const inPod = "/var/run/podmin/local/token"
	b, err := get(podURL(r.web, "/read?path="+inPod))
	if err != nil || string(b) != r.secret {
		p.Fatalf("web reads %s: %v (the value matches: %v)", inPod, err, string(b) == r.secret)
	}
	if _, err := get(podURL(r.probe, "/read?path="+inPod)); err == nil || !strings.Contains(err.Error(), "404") {
		p.Fatalf("probe reads %s: %v, want 404", inPod, err)
	}
	p.Figure("web reads its value at %s; Pod probe finds no such file (404)", inPod)
	host := filepath.Join(r.root, "run/podmin/workloads/web/secrets/local/token")
	var fs unix.Statfs_t
	if err := unix.Statfs(host, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		p.Fatalf("%s is not on a tmpfs (%v, type %#x)", host, err, fs.Type)
	}
	fi, err := os.Stat(host)
	if err != nil || fi.Mode().Perm() != 0o444 {
		p.Fatalf("%s: %v, mode %v, want 0444", host, err, fi.Mode())
	}
	store := filepath.Join(r.home, "data/podmin/secrets") + "/"
	var found []string
	files, size := 0, int64(0)
	for _, dir := range []string{r.root, r.bucket, r.home, r.logs} {
		for _, f := range filesUnder(dir) {
			data, err := os.ReadFile(f)
			if err != nil {
				continue // a socket or a file that went away
			}
			files++
			size += int64(len(data))
			if bytes.Contains(data, []byte(r.secret)) {
				found = append(found, f)
			}
		}
	}
	var elsewhere []string
	inStore := false
	for _, f := range found {
		switch {
		case f == host:
		case strings.HasPrefix(f, store):
			inStore = true
		default:
			elsewhere = append(elsewhere, f)
		}
	}
	if !slices.Contains(found, host) || !inStore || len(elsewhere) > 0 {
		p.Fatalf("the value is in %q; want it only in %s and the secrets store %s", found, host, store)
	}
	p.Figure("%d files (%.1f MiB: node root with containerd's and kubelet's state, bucket, CLI state, daemon logs) scanned: the value is only in the local secrets store and %s (tmpfs, 0444)",
		files, float64(size)/(1<<20), strings.TrimPrefix(host, r.dir+"/"))
}

// deleted: podmin delete makes kubelet stop every Pod and leaves no
// container, sandbox, mount, interface, file or process behind; then the
// daemons stop cleanly.
func (r *run) deleted(p *e2enode.Proof) {
	start := time.Now()
	r.podmin("delete", "web", "-g", nodegroup, "-y")
	r.podmin("delete", "probe", "-g", nodegroup, "-y")
	for _, d := range r.extra {
		r.podmin("delete", d[1], "-g", d[0], "-y", "--ignore-not-found")
	}
	r.waitFor(p, 3*time.Minute, "kubelet to list no Pods", func() bool { ps, err := e2enode.ListPods(podsAPISock); return err == nil && len(ps) == 0 })
	p.Figure("podmin delete → kubelet lists no Pods: %s", time.Since(start).Round(10*time.Millisecond))
	// Record when each kind of leftover went last, to say what took long.
	lastSeen := map[string]time.Duration{}
	var left []string
	deadline := time.Now().Add(2 * time.Minute)
	for left = r.leftovers(); len(left) > 0 && time.Now().Before(deadline); left = r.leftovers() {
		for _, l := range left {
			kind := strings.Fields(l)[0]
			if kind == "containerd" {
				kind = strings.TrimSuffix(strings.Fields(l)[1], ":") // containers (sandboxes included) or tasks
			}
			lastSeen[kind] = time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		p.Fatalf("the node is not clean:\n  %s", strings.Join(left, "\n  "))
	}
	var gone []string
	for kind, d := range lastSeen {
		gone = append(gone, fmt.Sprintf("%s until %s", kind, d.Round(100*time.Millisecond)))
	}
	slices.Sort(gone)
	p.Figure("podmin delete → no container, task, sandbox mount, Pod interface, CNI address, static Pod file or workload file left: %s (%s)",
		time.Since(start).Round(10*time.Millisecond), strings.Join(gone, ", "))
	for i := len(r.procs) - 1; i >= 0; i-- {
		if err := r.procs[i].Stop(30 * time.Second); err != nil {
			p.Error(err)
		}
	}
	r.procs = nil
	if left := r.processes(); len(left) > 0 {
		p.Fatalf("processes left after the daemons stopped: %q", left)
	}
	p.Figure("CoreDNS, podmin-agent, kubelet and containerd exited on SIGTERM; no shim or sandbox process left")
}

// nodeMounts are the node's own mounts, not its Pods': its /run and /var,
// the vpc namespace, kubelet's shared bind of its root directory, and the
// empty network namespace runsc pins once for all its gofers.
var nodeMounts = []string{"/run", "/var", "/run/netns", "/run/netns/vpc", "/var/lib/kubelet", runscRoot + "/k8s.io/null-netns"}

// leftovers names what the node's Pods left behind.
func (r *run) leftovers() []string {
	var out []string
	if ps, err := e2enode.ListPods(podsAPISock); err != nil || len(ps) > 0 {
		out = append(out, fmt.Sprintf("kubelet Pods: %d (%v)", len(ps), err))
	}
	for _, kind := range []string{"containers", "tasks"} {
		b, err := r.ctr(kind, "ls", "-q")
		if err != nil || len(bytes.TrimSpace(b)) > 0 {
			out = append(out, fmt.Sprintf("containerd %s: %q %v", kind, bytes.TrimSpace(b), err))
		}
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			mp := fields[4]
			if r.baseMounts[fields[0]] {
				continue // the machine's, or the node's own from its start
			}
			if !slices.Contains(nodeMounts, mp) &&
				(strings.HasPrefix(mp, "/run/") || strings.HasPrefix(mp, "/var/") || strings.HasPrefix(mp, r.dir+"/")) &&
				mp != filepath.Join(r.root, "run") {
				out = append(out, "mount "+mp)
			}
		}
		f.Close()
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Name != "lo" && i.Name != "eth0" {
			out = append(out, "interface "+i.Name)
		}
	}
	for _, pattern := range []string{
		filepath.Join(r.root, "etc/podmin/manifests/*.yaml"),
		filepath.Join(r.root, "run/podmin/workloads/*"),
		"/var/lib/kubelet/pods/*",
		"/var/lib/cni/networks/podmin/" + podPrefix.Addr().String()[:len("2001:db8:0:e2e1")] + "*",
		"/run/netns/cni-*",
	} {
		m, _ := filepath.Glob(pattern)
		for _, f := range m {
			out = append(out, "file "+f)
		}
	}
	return append(out, r.processes()...)
}

// processes names the running programs of the node's runtime: shims and
// sandboxes.
func (r *run) processes() []string {
	var out []string
	exes, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, e := range exes {
		exe, err := os.Readlink(e)
		if err != nil {
			continue
		}
		for _, d := range r.procs {
			if exe == d.Cmd.Path {
				exe = "" // a daemon itself
			}
		}
		if exe != "" && (strings.HasPrefix(exe, r.tools+"/") || strings.HasPrefix(exe, r.bin+"/")) {
			out = append(out, "process "+filepath.Dir(e)+" "+exe)
		}
	}
	return out
}
