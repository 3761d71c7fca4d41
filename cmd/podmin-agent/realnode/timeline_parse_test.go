// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A static Pod's replacement is read from containerd's and kubelet's own
// lines: the old sandbox is the one created for the Pod before the change,
// a sandbox of another Pod stopping is not the old one, and each step is
// taken once.
func TestParseReplacement(t *testing.T) {
	containerd := strings.Join([]string{
		`time="2026-12-04T21:50:30.100000000Z" level=info msg="RunPodSandbox for name:\"web-e2e-node\"  uid:\"aaa\"  namespace:\"default\" returns sandbox id \"01d\""`,
		`time="2026-12-04T21:50:31.000000000Z" level=info msg="RunPodSandbox for name:\"probe-e2e-node\"  uid:\"bbb\"  namespace:\"default\" returns sandbox id \"b0b\""`,
		`time="2026-12-04T21:51:00.500000000Z" level=info msg="StopPodSandbox for \"b0b\" returns successfully"`,
		`time="2026-12-04T21:51:01.000000000Z" level=info msg="StopPodSandbox for \"01d\""`,
		`time="2026-12-04T21:51:02.000000000Z" level=info msg="StopPodSandbox for \"01d\" returns successfully"`,
		`time="2026-12-04T21:51:02.500000000Z" level=info msg="StartContainer for \"c0\" returns successfully"`,
		`time="2026-12-04T21:51:13.000000000Z" level=info msg="RunPodSandbox for name:\"web-e2e-node\"  uid:\"ccc\"  namespace:\"default\""`,
		`time="2026-12-04T21:51:15.000000000Z" level=info msg="RunPodSandbox for name:\"web-e2e-node\"  uid:\"ccc\"  namespace:\"default\" returns sandbox id \"1ee\""`,
		`time="2026-12-04T21:51:16.000000000Z" level=info msg="StartContainer for \"c1\" returns successfully"`,
		`time="2026-12-04T21:51:17.000000000Z" level=info msg="StartContainer for \"c2\" returns successfully"`,
		`time="2026-12-04T21:51:20.000000000Z" level=info msg="StopPodSandbox for \"1ee\" returns successfully"`,
	}, "\n")
	kubelet := strings.Join([]string{
		`I1204 21:50:29.000000    4242 kubelet.go:2709] "SyncLoop ADD" source="file" pods=["default/web-e2e-node"]`,
		`I1204 21:51:00.250000    4242 kubelet.go:2719] "SyncLoop REMOVE" source="file" pods=["default/web-e2e-node"]`,
		`I1204 21:51:00.260000    4242 kubelet.go:2709] "SyncLoop ADD" source="file" pods=["default/web-e2e-node"]`,
	}, "\n")
	since := time.Date(2026, 12, 4, 21, 51, 0, 0, time.UTC)
	r, err := parseReplacement(containerd, kubelet, "web-e2e-node", since, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	want := replacement{
		seen:         since.Add(250 * time.Millisecond),
		oldStopped:   since.Add(2 * time.Second),
		newRequested: since.Add(13 * time.Second),
		newReady:     since.Add(15 * time.Second),
		started:      since.Add(16 * time.Second),
	}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	got := r.describe(since)
	for _, part := range []string{"file change +250ms", "old sandbox stopped +2s", "new sandbox +13s (12.75s after it saw the change, 11s after the old one stopped)", "ready +15s", "started +16s"} {
		if !strings.Contains(got, part) {
			t.Errorf("%q lacks %q", got, part)
		}
	}
	// Logs without the steps say so rather than inventing them.
	r, err = parseReplacement("", "", "web-e2e-node", since, time.UTC)
	if err != nil || r != (replacement{}) || !strings.Contains(r.describe(since), "not in the logs") {
		t.Fatalf("empty logs: %+v %v", r, err)
	}
	if _, err := parseReplacement(`time="yesterday" level=info msg="x"`, "", "web-e2e-node", since, time.UTC); err == nil {
		t.Fatal("a bad containerd time was accepted")
	}
}

// Failed readiness probes are read from kubelet's own lines, for the named
// Pod only and from since on.
func TestReadinessFailures(t *testing.T) {
	kubelet := strings.Join([]string{
		`I1204 21:50:59.000000    4242 prober.go:120] "Probe failed" probeType="Readiness" pod="default/web-e2e-node" podUID="a" containerName="web" probeResult="failure" output="connection refused"`,
		`I1204 21:51:01.500000    4242 prober.go:120] "Probe failed" probeType="Readiness" pod="default/web-e2e-node" podUID="b" containerName="web" probeResult="failure" output="connection refused"`,
		`I1204 21:51:02.000000    4242 prober.go:120] "Probe failed" probeType="Readiness" pod="default/webby-e2e-node" podUID="c" containerName="webby" probeResult="failure" output="x"`,
		`I1204 21:51:03.000000    4242 prober.go:120] "Probe failed" probeType="Liveness" pod="default/web-e2e-node" podUID="b" containerName="web" probeResult="failure" output="x"`,
		`I1204 21:51:11.500000    4242 prober.go:120] "Probe failed" probeType="Readiness" pod="default/web-e2e-node" podUID="b" containerName="web" probeResult="failure" output="x"`,
	}, "\n")
	since := time.Date(2026, 12, 4, 21, 51, 0, 0, time.UTC)
	got, err := readinessFailures(kubelet, "web-e2e-node", since, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{since.Add(1500 * time.Millisecond), since.Add(11500 * time.Millisecond)}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
