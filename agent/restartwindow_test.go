// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"strings"
	"testing"
	"time"
)

func TestRestartWindowFromEnv(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvRestartWindow {
				return v
			}
			return ""
		}
	}
	if o, err := OptionsFromEnv(env("")); err != nil || o.RestartWindow != nil {
		t.Fatalf("unset: %v %v", o.RestartWindow, err)
	}
	for v, want := range map[string]time.Duration{"45m": 45 * time.Minute, "0": 0, "5h": 5 * time.Hour} {
		if o, err := OptionsFromEnv(env(v)); err != nil || o.RestartWindow == nil || *o.RestartWindow != want {
			t.Errorf("%s=%s: %v %v", EnvRestartWindow, v, o.RestartWindow, err)
		}
	}
	for _, v := range []string{"6h", "-1m", "soon"} {
		if _, err := OptionsFromEnv(env(v)); err == nil || !strings.Contains(err.Error(), EnvRestartWindow) {
			t.Errorf("%s=%s accepted: %v", EnvRestartWindow, v, err)
		}
	}
}
