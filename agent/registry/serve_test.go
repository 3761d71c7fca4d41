// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"context"
	"net/http"
	"testing"

	"podmin.dev/podmin/agent/registry"
)

func TestListenAndServe(t *testing.T) {
	if registry.DefaultAddress != "127.0.0.1:5000" {
		t.Fatalf("DefaultAddress = %s, the spec binds only 127.0.0.1:5000", registry.DefaultAddress)
	}
	ctx, cancel := context.WithCancel(t.Context())
	l, err := registry.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- registry.Serve(ctx, l, registry.New(newFakeObjects())) }()
	resp, err := http.Get("http://" + l.Addr().String() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /v2/ = %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	if _, err := registry.Listen(t.Context(), "256.0.0.1:1"); err == nil {
		t.Error("Listen on a bad address succeeded")
	}
}
