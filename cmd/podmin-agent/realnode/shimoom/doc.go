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
