// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

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
