// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bars

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestBarsEndEvenWhenItemsFail(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, -1)
	tr := b.Begin("push hello:v1", 10)
	tr.Item("aaaaaaaaaaaa", 10).Add(3) // never done: a failed upload
	done := make(chan struct{})
	go func() { tr.End(errors.New("boom")); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("End waits for an item that will never finish")
	}
	b.Log("after")
	if !bytes.HasSuffix(buf.Bytes(), []byte("after\n")) {
		t.Errorf("a message after the transfer is not written directly: %q", buf.String())
	}
}
