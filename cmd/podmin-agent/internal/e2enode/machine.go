// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2enode

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A test's traces on the machine are recognised by its directory dir
// (a fresh temporary one): its cgroup roots are named CgroupName(dir) or
// CgroupName(dir)-<suffix>, its namespaces are listed in dir's
// namespaces file, and its programs live beneath dir.

// CgroupName is the test's cgroup root beneath every hierarchy; a test
// with several nodes names theirs CgroupName(dir)-<node>.
func CgroupName(dir string) string { return filepath.Base(dir) }

// nsFile is where the test records the namespaces it created.
func nsFile(dir string) string { return filepath.Join(dir, "namespaces") }

// RecordNamespaces adds the network and mount namespaces of process pid
// (0: the caller) to those the test owns.
func RecordNamespaces(dir string, pid int) error {
	self := "self"
	if pid != 0 {
		self = strconv.Itoa(pid)
	}
	var ids []string
	for _, ns := range []string{"net", "mnt"} {
		id, err := os.Readlink("/proc/" + self + "/ns/" + ns)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	f, err := os.OpenFile(nsFile(dir), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, strings.Join(ids, "\n"))
	return err
}

// Machine is what a test may leave behind on the machine.
type Machine struct {
	links, mounts, procs, cgroups []string
}

// HostState records the machine's network interfaces and what of dir's
// test is on it: mounts, processes and cgroups.
func HostState(dir string) (Machine, error) {
	var m Machine
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return m, err
	}
	for _, l := range links {
		m.links = append(m.links, l.Name())
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return m, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), dir) || strings.Contains(sc.Text(), CgroupName(dir)) {
			m.mounts = append(m.mounts, sc.Text())
		}
	}
	for _, pid := range Processes(dir) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		m.procs = append(m.procs, fmt.Sprintf("%d %s", pid, exe))
	}
	for _, pattern := range []string{CgroupName(dir), CgroupName(dir) + "-*"} {
		for _, base := range []string{"/sys/fs/cgroup/*/", "/sys/fs/cgroup/"} {
			cg, _ := filepath.Glob(base + pattern)
			m.cgroups = append(m.cgroups, cg...)
		}
	}
	return m, nil
}

// Diff names what after has that before had not. Of the machine's
// network interfaces it counts only those ownLink says the test makes:
// another program may add its own meanwhile.
func (before Machine) Diff(after Machine, ownLink func(name string) bool) []string {
	var out []string
	for _, l := range after.links {
		if !slices.Contains(before.links, l) && ownLink(l) {
			out = append(out, "network interface "+l)
		}
	}
	for _, m := range after.mounts {
		out = append(out, "mount "+m)
	}
	for _, p := range after.procs {
		out = append(out, "process "+p)
	}
	for _, c := range after.cgroups {
		out = append(out, "cgroup "+c)
	}
	return out
}

// Processes lists the processes that belong to dir's test: those in a
// network or mount namespace it recorded or in one of its cgroup roots
// (sandboxes have namespaces of their own, but live in a node's cgroups),
// and any running a program beneath dir.
func Processes(dir string) []int {
	var ids []string
	if b, err := os.ReadFile(nsFile(dir)); err == nil {
		ids = strings.Fields(string(b))
	}
	cg := "/" + CgroupName(dir)
	self := os.Getpid()
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		base := "/proc/" + e.Name()
		mine := false
		for _, ns := range []string{"net", "mnt"} {
			if id, err := os.Readlink(base + "/ns/" + ns); err == nil && slices.Contains(ids, id) {
				mine = true
			}
		}
		if b, err := os.ReadFile(base + "/cgroup"); err == nil && (strings.Contains(string(b), cg+"/") || strings.Contains(string(b), cg+"-")) {
			mine = true
		}
		if exe, err := os.Readlink(base + "/exe"); err == nil && strings.HasPrefix(exe, dir+"/") {
			mine = true
		}
		if mine {
			out = append(out, pid)
		}
	}
	return out
}

// KillAll kills what is left of dir's test's processes and waits up to
// ten seconds for them to go.
func KillAll(dir string) {
	pids := Processes(dir)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	WaitGone(pids)
}

// WaitGone waits up to ten seconds for killed processes to disappear; a
// zombie, which holds nothing but its exit status for its parent, counts
// as gone.
func WaitGone(pids []int) {
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil && !zombie(pid) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// zombie reports whether process pid has exited and waits for its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(s[i+1:], " Z")
}
