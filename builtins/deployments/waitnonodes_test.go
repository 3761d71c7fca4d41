// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/state"
)

// A wait on a cluster where setup never ran and no agent ever took part in
// coordination fails at its first read, saying why, instead of waiting out
// its timeout for nodes that cannot exist: status --wait, the built-in and
// deploy --wait alike.
func TestWaitFailsAtOnceWhenNoNodeEverReported(t *testing.T) {
	for _, via := range []string{"wait", "deploy --wait"} {
		t.Run(via, func(t *testing.T) {
			env := openvtest.NewEnv(t)
			connectedLocal(t, env)
			deployBuiltIn(t, env, "web", "hello:v1")
			env.Sleep = func(context.Context, time.Duration) error { return errors.New("the wait polled again") }
			var err error
			if via == "wait" {
				_, err = Wait(t.Context(), env, WaitOptions{Name: "web", NodeGroup: "workers", Timeout: time.Hour})
			} else {
				_, err = Deploy(t.Context(), env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v2"}}, Wait: UntilApplied})
			}
			if !errors.Is(err, ErrNoNodes) {
				t.Fatalf("err %v, want ErrNoNodes", err)
			}
			for _, want := range []string{state.TFVarsPath, state.DNSLeaderPath, "podmin setup"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
}

// Once setup published the configuration, nodes may still be starting:
// the wait goes on (until its timeout here), with the reason in its
// summary.
func TestWaitGoesOnWhileNodesMayStart(t *testing.T) {
	env := openvtest.NewEnv(t)
	b := connectedLocal(t, env)
	deployBuiltIn(t, env, "web", "hello:v1")
	if _, err := b.Put(t.Context(), state.TFVarsPath, []byte(`{"cluster": "demo", "nodegroups": [{"name": "workers", "size": 1}]}`)); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	env.Now = func() time.Time { return now }
	polls := 0
	env.Sleep = func(ctx context.Context, d time.Duration) error {
		polls++
		now = now.Add(d)
		return ctx.Err()
	}
	_, err := Wait(t.Context(), env, WaitOptions{Name: "web", NodeGroup: "workers", Timeout: time.Minute})
	var te *WaitTimeoutError
	if !errors.As(err, &te) || polls == 0 || !strings.Contains(err.Error(), "no agent takes part in coordination yet") {
		t.Fatalf("after %d polls: %v, want a timeout", polls, err)
	}
}
