// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !(linux && amd64)

package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
)

func execShim(real string, args []string) error {
	cmd := exec.Command(real, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err == nil {
		os.Exit(0)
	}
	return err
}

// traceStart is implemented for linux/amd64 only; elsewhere the real
// shim runs untraced and a refused OOM-score write fails it as usual.
func traceStart(cmd *exec.Cmd, log io.Writer) (int, error) {
	_, _ = io.WriteString(log, "shimoom: tracing is implemented for linux/amd64 only: running the shim unchanged\n")
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}
