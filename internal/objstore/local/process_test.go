// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
)

// Environment of a child process in TestCrossProcess.
const (
	envChildDir = "PODMIN_TEST_LOCAL_CHILD_DIR"
	envChildID  = "PODMIN_TEST_LOCAL_CHILD_ID"
)

const (
	children       = 8
	childKeys      = 50 // create-only races per child
	childIncrement = 20 // counter increments per child
)

// TestCrossProcess re-executes the test binary as several processes that
// race create-only writes on the same keys and increment one counter with
// compare-and-swap: every key must have exactly one creator and no
// increment may be lost.
func TestCrossProcess(t *testing.T) {
	if dir := os.Getenv(envChildDir); dir != "" {
		runChild(t, local.Open(dir), os.Getenv(envChildID))
		return
	}
	b := newBucket(t)
	if _, err := b.Put(t.Context(), "counter", []byte("0")); err != nil {
		t.Fatal(err)
	}
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   bytes.Buffer
	}
	var cs []*child
	for i := range children {
		c := &child{cmd: exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCrossProcess$", "-test.count=1")}
		c.cmd.Env = append(os.Environ(), envChildDir+"="+b.Dir(), envChildID+"="+strconv.Itoa(i))
		c.cmd.Stdout = &c.out
		c.cmd.Stderr = &c.out
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	// Children wait for end of input, so they start racing together.
	for _, c := range cs {
		c.stdin.Close()
	}
	winners := map[string][]string{}
	for i, c := range cs {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, c.out.String())
		}
		sc := bufio.NewScanner(&c.out)
		for sc.Scan() {
			if key, ok := strings.CutPrefix(sc.Text(), "won "); ok {
				winners[key] = append(winners[key], strconv.Itoa(i))
			}
		}
	}
	for k := range childKeys {
		key := fmt.Sprintf("race/%02d", k)
		if len(winners[key]) != 1 {
			t.Errorf("%s created by children %v, want exactly one", key, winners[key])
			continue
		}
		obj, err := b.Get(t.Context(), key, objstore.GetOptions{})
		if want := "child " + winners[key][0]; err != nil || string(obj.Data) != want {
			t.Errorf("%s = %q, %v; want the winner's %q", key, obj.Data, err, want)
		}
	}
	obj, err := b.Get(t.Context(), "counter", objstore.GetOptions{})
	if want := strconv.Itoa(children * childIncrement); err != nil || string(obj.Data) != want {
		t.Errorf("counter = %q, %v; want %s", obj.Data, err, want)
	}
}

// runChild is one racing process. It reports each key it created as a
// "won KEY" line on stdout.
func runChild(t *testing.T, b *local.Bucket, id string) {
	ctx := t.Context()
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		t.Fatal(err)
	}
	for k := range childKeys {
		key := fmt.Sprintf("race/%02d", k)
		_, err := b.PutIfAbsent(ctx, key, []byte("child "+id))
		switch {
		case err == nil:
			fmt.Printf("won %s\n", key)
		case !errors.Is(err, objstore.ErrPrecondition):
			t.Fatalf("PutIfAbsent(%s): %v", key, err)
		}
	}
	for range childIncrement {
		if err := increment(ctx, b, "counter"); err != nil {
			t.Fatal(err)
		}
	}
}

// increment adds one to a decimal counter with a bounded CAS loop.
func increment(ctx context.Context, s objstore.Store, key string) error {
	const maxAttempts = 10000
	for range maxAttempts {
		obj, err := s.Get(ctx, key, objstore.GetOptions{})
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(string(obj.Data))
		if err != nil {
			return err
		}
		_, err = s.PutIfMatch(ctx, key, []byte(strconv.Itoa(n+1)), obj.ETag)
		if !errors.Is(err, objstore.ErrPrecondition) {
			return err
		}
	}
	return fmt.Errorf("increment %s: still contended after %d attempts", key, maxAttempts)
}

// TestReaderNeverSeesPartialObject reads an object while it is rewritten
// 200 times. Each version is one byte value repeated, and versions differ
// in length, so a torn or partial read cannot pass the check.
func TestReaderNeverSeesPartialObject(t *testing.T) {
	const rewrites = 200
	ctx := t.Context()
	b := newBucket(t)
	version := func(v int) []byte { return bytes.Repeat([]byte{byte(v)}, 64<<10+v*97) }
	if _, err := b.Put(ctx, "hot/object", version(0)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for v := 1; v <= rewrites; v++ {
			data := version(v)
			md := objstore.PutOptions{Metadata: map[string]string{"version": strconv.Itoa(v % 256)}}
			if _, err := b.Write(ctx, "hot/object", bytes.NewReader(data), int64(len(data)), md); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	reads := 0
	for finished := false; !finished; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true // one more read of the final version
		default:
		}
		obj, err := b.Get(ctx, "hot/object", objstore.GetOptions{})
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		v := int(obj.Data[0])
		if !bytes.Equal(obj.Data, version(v)) {
			t.Fatalf("read %d: %d bytes that are not version %d", reads, len(obj.Data), v)
		}
		if v != 0 && obj.Metadata["version"] != strconv.Itoa(v) {
			t.Fatalf("read %d: version %d with metadata %v", reads, v, obj.Metadata)
		}
		sum := sha256.Sum256(obj.Data)
		if want := `"` + hex.EncodeToString(sum[:]) + `"`; obj.ETag != want {
			t.Fatalf("read %d: ETag %s does not match the data (%s)", reads, obj.ETag, want)
		}
		if finished && v != rewrites%256 {
			t.Fatalf("final read is version %d, want %d", v, rewrites%256)
		}
	}
	t.Logf("%d reads during %d rewrites", reads, rewrites)
}
