// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a fake shim: its "start" forks a daemon,
// lowers the daemon's OOM score the way the gVisor shim does, writes an
// invalid score (an error that must pass through) and exits 3.
const envFake = "SHIMOOM_TEST_FAKE"

func TestMain(m *testing.M) {
	switch os.Getenv(envFake) {
	case "start":
		fakeStart()
	case "daemon":
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeStart() {
	daemon := exec.Command(os.Args[0])
	daemon.Env = append(os.Environ(), envFake+"=daemon")
	if err := daemon.Start(); err != nil {
		fmt.Println("daemon:", err)
		os.Exit(1)
	}
	defer func() { _ = daemon.Process.Kill() }()
	write := func(v string) string {
		f, err := os.OpenFile(fmt.Sprintf("/proc/%d/oom_score_adj", daemon.Process.Pid), os.O_WRONLY, 0)
		if err != nil {
			return err.Error()
		}
		defer f.Close()
		if _, err := f.WriteString(v); err != nil {
			return err.Error()
		}
		return "ok"
	}
	fmt.Printf("lower: %s\n", write("-999"))
	fmt.Printf("invalid: %s\n", write("not-a-number"))
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", daemon.Process.Pid))
	fmt.Printf("score: %s\n", strings.TrimSpace(string(b)))
	_ = daemon.Process.Kill()
	_ = daemon.Wait()
	os.Exit(3)
}

func fakeShim(t *testing.T) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("shimoom traces on linux/amd64 only")
	}
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-namespace", "k8s.io", "start")
	cmd.Env = append(os.Environ(), envFake+"=start")
	cmd.Stdout = &out
	return cmd, &out
}

// TestForgivesOnlyTheRefusedOOMScoreWrite runs the fake shim untraced
// (to see what this machine does) and traced: traced, lowering the OOM
// score always reports success, an invalid value still fails, and the
// output and exit code pass through.
func TestForgivesOnlyTheRefusedOOMScoreWrite(t *testing.T) {
	plain, plainOut := fakeShim(t)
	err := plain.Run()
	if plain.ProcessState == nil || plain.ProcessState.ExitCode() != 3 {
		t.Fatalf("untraced fake shim: %v\n%s", err, plainOut)
	}
	refused := strings.Contains(plainOut.String(), "lower: write /proc/")
	t.Logf("this machine refuses to lower an OOM score: %v", refused)

	traced, out := fakeShim(t)
	var log bytes.Buffer
	code, err := traceStart(traced, &log)
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 {
		t.Fatalf("exit code %d, want 3 (output %q)", code, out)
	}
	got := out.String()
	if !strings.Contains(got, "lower: ok\n") {
		t.Fatalf("lowering the score was not reported as done:\n%s\nlog: %s", got, &log)
	}
	if !strings.Contains(got, "invalid: write /proc/") || !strings.Contains(got, "invalid argument") {
		t.Fatalf("an unrelated write error did not pass through:\n%s", got)
	}
	if forgiven := strings.Contains(log.String(), "reported as written"); forgiven != refused {
		t.Fatalf("forgiven %v, but the machine refuses %v; log: %s", forgiven, refused, &log)
	}
	if refused && strings.Contains(got, "score: -999") {
		t.Fatalf("the score changed although the kernel refused it:\n%s", got)
	}
}

func TestOOMScoreFile(t *testing.T) {
	for path, want := range map[string]bool{
		"/proc/123/oom_score_adj":        true,
		"/proc/self/oom_score_adj":       false,
		"/proc/123/oom_adj":              false,
		"/tmp/proc/123/oom_score_adj":    false,
		"/proc/123/oom_score_adj.bak":    false,
		"/proc/123/task/1/oom_score_adj": false,
	} {
		if got := oomScoreFile.MatchString(path); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}
