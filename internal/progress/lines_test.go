// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package progress

import (
	"bytes"
	"errors"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/syncio"
)

func TestLinesArePeriodicAndPlain(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	l := &Lines{W: &buf, Every: 5 * time.Second, Now: func() time.Time { return now }}
	tr := l.Begin("push hello:v1", 100<<20)
	tr.Skip(20 << 20) // already in the bucket
	a := tr.Item("aaaaaaaaaaaa", 40<<20)
	now = now.Add(2 * time.Second)
	a.Add(10 << 20) // too soon for a line
	now = now.Add(3 * time.Second)
	a.Add(30 << 20)
	a.Done()
	b := tr.Item("bbbbbbbbbbbb", 40<<20)
	now = now.Add(1 * time.Second)
	b.Add(40 << 20) // one second after the last line: none
	b.Done()
	tr.End(nil)
	want := "push hello:v1: 100.0 MiB to transfer\n" +
		"push hello:v1: 40.0 MiB of 80.0 MiB (50%), 8.0 MiB/s, 5s left\n" +
		"push hello:v1: done, 80.0 MiB in 6s\n"
	if buf.String() != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", buf.String(), want)
	}

	buf.Reset()
	tr = l.Begin("pull example.com/web:v1", 0)
	it := tr.Item("cccccccccccc", 1<<20)
	now = now.Add(10 * time.Second)
	Reader(it, bytes.NewReader(make([]byte, 1<<20))).Read(make([]byte, 1<<20))
	tr.End(errors.New("connection reset"))
	want = "pull example.com/web:v1: started\n" +
		"pull example.com/web:v1: 1.0 MiB of 1.0 MiB (100%), 102.4 KiB/s\n" +
		"pull example.com/web:v1: failed after 1.0 MiB\n"
	if buf.String() != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// syncBuffer is a bytes.Buffer safe for the heartbeat's writes.
type syncBuffer = syncio.Buffer

// TestLinesBeatWhileNothingMoves shows a stalled transfer in the log: a
// line every Every even though no byte arrived.
func TestLinesBeatWhileNothingMoves(t *testing.T) {
	var buf syncBuffer
	l := &Lines{W: &buf, Every: 10 * time.Millisecond}
	tr := l.Begin("push big:v1", 1<<30)
	tr.Item("aaaaaaaaaaaa", 1<<30)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), "push big:v1: 0 B of 1.0 GiB (0%)\n") {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat line:\n%s", buf.String())
		}
		runtime.Gosched()
	}
	tr.End(nil)
	// End stops the heartbeat first: its line is the last one.
	if !regexp.MustCompile(`push big:v1: done, 0 B in \S+\n$`).MatchString(buf.String()) {
		t.Fatalf("no end line last:\n%s", buf.String())
	}
}
