// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/nodepod"
)

// /readyz?verbose adds one line per deployment: the revision applied,
// readiness (unknown without coordination and kubelet) and restarts;
// plain /readyz stays as it was.
func TestReadyzVerboseNamesEachDeployment(t *testing.T) {
	a := startLocalAgent(t, 20*time.Millisecond)
	e := commit(t, a.bucket, "web", "hello:v1", false)
	rev := nodepod.Revision(e)[:12]
	waitFor(t, 10*time.Second, "web in /readyz?verbose", func() bool {
		code, body := a.get(t, "/readyz?verbose")
		return code == http.StatusOK && strings.Contains(body, "deployment web: revision "+rev+" applied, readiness unknown (coordination is off: readiness is not followed), 0 restart(s)")
	})
	if _, body := a.get(t, "/readyz"); body != "ready\n" {
		t.Fatalf("/readyz body %q", body)
	}
}
