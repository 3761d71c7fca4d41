// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Command shimoom runs gVisor's containerd-shim-runsc-v1 on machines that
// withhold CAP_SYS_RESOURCE, for the real-node end-to-end test only.
//
// The shim's "start" action forks the shim daemon and then lowers the
// daemon's oom_score_adj to -999. Lowering an OOM score needs
// CAP_SYS_RESOURCE; where the machine keeps it out of even root's bounding
// set, the kernel answers EACCES and the shim gives up, so no container can
// start. containerd's own helper ignores exactly that refusal for
// unprivileged shims. shimoom does the same from the outside: it runs
// "start" under ptrace and, when a write to /proc/<pid>/oom_score_adj
// fails with EACCES, reports the write as done, leaving the daemon at the
// score it inherited. Every other system call, the exit status and the
// standard streams pass through untouched; the daemon itself is not
// traced (Go forks it with CLONE_VFORK, which tracing of clones skips).
// Other actions exec the real shim directly.
//
// containerd runs it through the runtime's runtime_path; the real shim is
// the containerd-shim-runsc-v1 beside it, or the one PODMIN_RUNSC_SHIM
// names. containerd reads "start"'s standard output and error together as
// the shim's address, so shimoom writes nothing there: it appends a line
// for every forgiven write to the file PODMIN_SHIMOOM_LOG names, if any.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// Environment of the wrapper.
const (
	// EnvShim names the real shim binary.
	EnvShim = "PODMIN_RUNSC_SHIM"
	// EnvLog names the file forgiven writes are logged to.
	EnvLog = "PODMIN_SHIMOOM_LOG"
)

func main() {
	real, err := realShim()
	if err != nil {
		fmt.Fprintf(os.Stderr, "shimoom: %v\n", err)
		os.Exit(1)
	}
	args := os.Args[1:]
	if len(args) == 0 || args[len(args)-1] != "start" {
		err = execShim(real, args)
		fmt.Fprintf(os.Stderr, "shimoom: exec %s: %v\n", real, err)
		os.Exit(1)
	}
	cmd := exec.Command(real, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	log := io.Discard
	if p := os.Getenv(EnvLog); p != "" {
		if f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			defer f.Close()
			log = f
		}
	}
	code, err := traceStart(cmd, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "shimoom: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// realShim finds the gVisor shim this wrapper stands in front of.
func realShim() (string, error) {
	if p := os.Getenv(EnvShim); p != "" {
		return p, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the real shim: %w: set %s", err, EnvShim)
	}
	p := filepath.Join(filepath.Dir(self), "containerd-shim-runsc-v1")
	if p == self {
		return "", fmt.Errorf("shimoom is installed as containerd-shim-runsc-v1 itself: install it under another name or set %s", EnvShim)
	}
	return p, nil
}

// oomScoreFile matches the file whose refused write is forgiven.
var oomScoreFile = regexp.MustCompile(`^/proc/[0-9]+/oom_score_adj$`)
