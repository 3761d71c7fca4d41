// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// fakeLostReply applies the first index write it sees, lets another writer
// commit (so that reading the index back cannot prove whose write it is),
// then reports the write's reply as lost.
type fakeLostReply struct {
	objstore.Store
	once  sync.Once
	other func(ctx context.Context, inner objstore.Store) error
}

var errReplyLost = errors.New("read tcp: connection reset by peer (the reply was lost)")

func (f *fakeLostReply) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	etag, err := objstore.WriteObject(ctx, f.Store, key, body, size, opts)
	if key != state.IndexPath || err != nil {
		return etag, err
	}
	lost := false
	f.once.Do(func() {
		lost = true
		err = f.other(ctx, f.Store)
	})
	if lost && err == nil {
		return "", errReplyLost
	}
	return etag, err
}

func (f *fakeLostReply) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return objstore.OpenObject(ctx, f.Store, key, opts)
}

// A delete whose write landed but whose reply was lost, when reading the
// index back cannot prove whose write removed the entry (the version read
// carries no write IDs), still finds the
// entry gone: it succeeds, exit 0, and says that the reply was lost and the
// deployment is gone, instead of "does not exist" and exit 3.
func TestDeleteWithLostReplyThatLanded(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	c.adjust = func(e *builtins.Env) {
		e.WrapStore = func(s objstore.Store) objstore.Store {
			return &fakeLostReply{Store: s, other: func(ctx context.Context, inner objstore.Store) error {
				// A writer that keeps no write IDs (an older CLI) rewrites
				// the index: the write ID of the delete is gone from it.
				obj, err := inner.Get(ctx, state.IndexPath, objstore.GetOptions{})
				if err != nil {
					return err
				}
				_, err = inner.PutIfMatch(ctx, state.IndexPath, obj.Data, obj.ETag)
				return err
			}}
		}
	}
	out, errs, code := c.run("delete", "web", "-g", "workers", "-y", "-o", "json")
	if code != exitOK || !strings.Contains(out, `"action": "deleted"`) {
		t.Fatalf("exit %d, want 0 with action deleted:\n%s%s", code, out, errs)
	}
	for _, want := range []string{"the reply to the index write was lost", "workers/web is no longer in the index: it is deleted"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(out+errs, "does not exist") {
		t.Errorf("a delete that took effect says the deployment does not exist:\n%s%s", out, errs)
	}
	c.adjust = nil
	if list := c.ok("list"); strings.Contains(list, "web") {
		t.Fatalf("list after the delete:\n%s", list)
	}
}
