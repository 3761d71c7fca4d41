// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2enode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Daemon is one long-running process of a node, logging to a file.
type Daemon struct {
	Name string
	Cmd  *exec.Cmd
	// Log is the file its standard output and error go to.
	Log  string
	done chan struct{}
	err  error
}

// Start runs argv as daemon name, with env added to the test's
// environment, logging to <logs>/<name>.log. Prefix, when set, runs first
// with argv as its arguments: nsenter into a node's namespaces, which
// execs argv in its own process, so the Daemon's process is the program.
// The daemon is killed if the test dies.
func Start(logs, name string, prefix, env []string, argv ...string) (*Daemon, error) {
	d := &Daemon{Name: name, Log: filepath.Join(logs, name+".log"), done: make(chan struct{})}
	f, err := os.Create(d.Log)
	if err != nil {
		return nil, err
	}
	argv = append(append([]string(nil), prefix...), argv...)
	d.Cmd = exec.Command(argv[0], argv[1:]...)
	d.Cmd.Env = append(os.Environ(), env...)
	d.Cmd.Stdout, d.Cmd.Stderr = f, f
	d.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.Cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		d.err = d.Cmd.Wait()
		f.Close()
		close(d.done)
	}()
	return d, nil
}

// Done is closed once the process has exited.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Err is how the process ended, once Done is closed.
func (d *Daemon) Err() error { return d.err }

// Stop sends SIGTERM and waits up to limit, then kills.
func (d *Daemon) Stop(limit time.Duration) error {
	select {
	case <-d.done:
		return fmt.Errorf("%s had already exited: %v", d.Name, d.err)
	default:
	}
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return nil
	case <-time.After(limit):
		_ = d.Cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM: killed", d.Name, limit)
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (d *Daemon) Kill() {
	_ = d.Cmd.Process.Kill()
	<-d.done
}

// Exited reports whether the process has ended.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// LogText is the daemon's log so far.
func (d *Daemon) LogText() string {
	b, _ := os.ReadFile(d.Log)
	return string(b)
}

// Tail is the end of the daemon's log, for failure messages.
func (d *Daemon) Tail() string {
	s := d.LogText()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return fmt.Sprintf("--- %s (%s) ---\n%s", d.Name, d.Log, s)
}

// KeepLog renames the log of a daemon that exited on purpose to
// <log>.<n>, so the next daemon of the name logs beside it.
func (d *Daemon) KeepLog() {
	for i := 1; ; i++ {
		kept := fmt.Sprintf("%s.%d", d.Log, i)
		if _, err := os.Stat(kept); os.IsNotExist(err) {
			_ = os.Rename(d.Log, kept)
			return
		}
	}
}

// IsSocket reports whether path is a Unix socket.
func IsSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}
