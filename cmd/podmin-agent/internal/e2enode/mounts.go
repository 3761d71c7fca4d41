// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2enode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// MakePrivate stops the calling process's mount namespace, a new one,
// from sharing mounts with the machine's: nothing mounted after it
// reaches the machine.
func MakePrivate() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private in the new mount namespace: %w", err)
	}
	return nil
}

// PrepareRoot lays out a node root and mounts its filesystems beneath it
// in the calling mount namespace: a tmpfs for its run, a tmpfs of
// containerdSize (e.g. "1g") for containerd's root, so that a proof can
// fill it without touching the machine's disk, and a bpf filesystem of
// its own at sys/fs/bpf, where the agent pins its dataplane so that a
// restarted agent adopts it. A mount namespace cloned afterwards shares
// these filesystems.
func PrepareRoot(root, containerdSize string) error {
	for _, d := range []string{"run", "var/lib", "var/log", "var/tmp", "etc/podmin/manifests", "etc/kubernetes",
		"etc/containerd/certs.d/registry.podmin.internal", "etc/cni/net.d", "etc/coredns", "sys/fs/bpf"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(root, "var/tmp"), 0o1777); err != nil {
		return err
	}
	for link, target := range map[string]string{"var/run": "../run", "var/lock": "../run/lock"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			return err
		}
	}
	containerd := filepath.Join(root, "var/lib/containerd")
	if err := os.MkdirAll(containerd, 0o700); err != nil {
		return err
	}
	for _, m := range []struct{ fs, dir, opts string }{
		{"tmpfs", filepath.Join(root, "run"), "mode=0755"},
		{"tmpfs", containerd, "mode=0700,size=" + containerdSize},
		{"bpf", filepath.Join(root, "sys/fs/bpf"), "mode=0700"},
	} {
		if err := unix.Mount(m.fs, m.dir, m.fs, 0, m.opts); err != nil {
			return fmt.Errorf("mount %s at %s: %w", m.fs, m.dir, err)
		}
	}
	return nil
}

// BindRoot makes the node root's run and var the calling mount
// namespace's /run and /var, so kubelet, containerd and the agent use a
// node's real paths without touching the machine's. Call it only in the
// node's own, private mount namespace.
func BindRoot(root string) error {
	for _, d := range []string{"run", "var"} {
		if err := unix.Mount(filepath.Join(root, d), "/"+d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s over /%s: %w", filepath.Join(root, d), d, err)
		}
	}
	return nil
}

// MountIDs are the IDs of the calling process's mounts (the first field of
// /proc/self/mountinfo): a baseline for the checks that count only what a
// node mounted after it.
func MountIDs() (map[string]bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out[f[0]] = true
		}
	}
	return out, nil
}

// MakeCgroupRoot creates cgroup root name (e.g. podmin-e2e-123) in every
// hierarchy, as kubelet wants it to exist, and returns its removal, which
// fails if anything is left in it.
func MakeCgroupRoot(name string) (remove func() error, err error) {
	var dirs []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dirs = []string{"/sys/fs/cgroup/" + name} // unified
	} else {
		hs, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
		for _, h := range hs {
			dirs = append(dirs, filepath.Join(filepath.Dir(h), name))
		}
	}
	remove = func() error {
		// Killed tasks leave their cgroups only once they have exited,
		// which a sandbox with many threads takes a moment to do.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var errs []error
			for _, d := range dirs {
				errs = append(errs, RemoveCgroup(d))
			}
			err := errors.Join(errs...)
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return remove, err
		}
		// A cgroup v1 cpuset starts empty: give it its parent's CPUs and
		// memory nodes, or no task can join it.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return remove, err
				}
			}
		}
	}
	return remove, nil
}

// RemoveCgroup removes a cgroup directory tree, deepest first; a cgroup
// that still has tasks refuses and is reported.
func RemoveCgroup(dir string) error {
	var subdirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			subdirs = append(subdirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(subdirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(subdirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", subdirs[i], err))
		}
	}
	return errors.Join(errs...)
}
