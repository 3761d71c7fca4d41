// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/secrets"
)

// TestErrorsNameKeywords checks that a script's errors speak of keyword
// arguments where the CLI's speak of flags, and still match sentinels.
func TestErrorsNameKeywords(t *testing.T) {
	cases := map[string]string{
		`podmin.deployments.deploy("web", nodegroup = "w")`:                               "deploy needs image = for the built-in manifest, or file = with a manifest",
		`podmin.deployments.deploy("web", nodegroup = "Bad", image = "x:1")`:              "argument nodegroup: invalid NodeGroup ID",
		`podmin.secrets.create("k", value = "some-value")`:                                "no Pod given: pass for_ = POD (the DaemonSet's name), or system = for otel-logs-headers",
		`podmin.secrets.create("k", for_ = "web")`:                                        "pass the value as value = or file =",
		`podmin.deployments.deploy("web", nodegroup = "w", image = "x:1", wait = "soon")`: "wait = soon: wait for applied or ready",
	}
	for script, want := range cases {
		e := newEnv(t)
		_, err := e.run(Options{}, script+"\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %q", script, err, want)
		}
		if strings.Contains(script, "secrets.create(\"k\", value") && !errors.Is(err, secrets.ErrInvalid) {
			t.Errorf("%s: the rewritten error no longer matches secrets.ErrInvalid", script)
		}
	}
}
