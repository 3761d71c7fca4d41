// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

func execShim(real string, args []string) error {
	return syscall.Exec(real, append([]string{real}, args...), os.Environ())
}

// ptrace constants the syscall package does not name.
const (
	optTraceSysGood = 0x1
	optTraceClone   = 0x8
	optExitKill     = 0x100000
	eventClone      = 3
	syscallTrap     = syscall.SIGTRAP | 0x80
)

// traceStart runs cmd (the real shim's start) under ptrace, forgives a
// refused write to an oom_score_adj file (logging it to log) and returns
// the shim's exit code.
func traceStart(cmd *exec.Cmd, log io.Writer) (int, error) {
	// Every ptrace request must come from the thread that attached.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	real := cmd.Path
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", real, err)
	}
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	// The child stops with SIGTRAP after its execve.
	if _, err := syscall.Wait4(pid, &ws, syscall.WALL, nil); err != nil {
		return 0, fmt.Errorf("wait for %s to start: %w", real, err)
	}
	if !ws.Stopped() {
		return exitCode(ws), nil
	}
	if err := syscall.PtraceSetOptions(pid, optTraceSysGood|optTraceClone|optExitKill); err != nil {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("trace %s: %w", real, err)
	}
	t := tracer{log: log, inCall: map[int]bool{}, seen: map[int]bool{pid: true}}
	if err := syscall.PtraceSyscall(pid, 0); err != nil {
		return 0, fmt.Errorf("resume %s: %w", real, err)
	}
	for {
		tid, err := syscall.Wait4(-1, &ws, syscall.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("wait for %s: %w", real, err)
		}
		if ws.Exited() || ws.Signaled() {
			delete(t.inCall, tid)
			if tid == pid {
				// Reap the leader and let cmd copy the last output.
				_ = cmd.Wait()
				return exitCode(ws), nil
			}
			continue
		}
		if ws.Stopped() {
			// A thread that exited meanwhile makes the resume fail
			// with ESRCH; its exit is reported by the next wait.
			_ = syscall.PtraceSyscall(tid, t.stopped(tid, ws))
		}
	}
}

// tracer is the state of one traced start.
type tracer struct {
	log io.Writer
	// inCall records, per thread, whether its last syscall stop was an
	// entry.
	inCall map[int]bool
	// seen holds the threads whose first stop has been handled.
	seen map[int]bool
}

// stopped handles one ptrace stop of tid and returns the signal to
// deliver when it resumes.
func (t *tracer) stopped(tid int, ws syscall.WaitStatus) int {
	sig := ws.StopSignal()
	first := !t.seen[tid]
	t.seen[tid] = true
	switch {
	case sig == syscallTrap:
		entering := !t.inCall[tid]
		t.inCall[tid] = entering
		if !entering {
			t.forgive(tid)
		}
		return 0
	case sig == syscall.SIGTRAP:
		// A ptrace event (a new thread, an exec): nothing to deliver.
		return 0
	case sig == syscall.SIGSTOP && first:
		// A new thread starts with a SIGSTOP of its own.
		return 0
	}
	return int(sig)
}

// forgive turns an EACCES from a write to an oom_score_adj file into the
// full count of bytes, as if it had been written.
func (t *tracer) forgive(tid int) {
	var regs syscall.PtraceRegs
	if err := syscall.PtraceGetRegs(tid, &regs); err != nil {
		return
	}
	if regs.Orig_rax != syscall.SYS_WRITE || int64(regs.Rax) != -int64(syscall.EACCES) {
		return
	}
	target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", tid, int(regs.Rdi)))
	if err != nil || !oomScoreFile.MatchString(target) {
		return
	}
	regs.Rax = regs.Rdx
	if err := syscall.PtraceSetRegs(tid, &regs); err != nil {
		fmt.Fprintf(t.log, "shimoom: could not forgive the refused write to %s: %v\n", target, err)
		return
	}
	fmt.Fprintf(t.log, "shimoom: the kernel refused to lower %s (no CAP_SYS_RESOURCE): reported as written; the shim keeps its inherited OOM score\n", target)
}

func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
