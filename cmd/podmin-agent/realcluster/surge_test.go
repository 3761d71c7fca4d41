// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// solo is the one-node NodeGroup of proof 4b and its DaemonSet's name.
const solo = "solo"

// withSurge adds maxSurge 1 (and maxUnavailable 0) to the DaemonSet of a
// manifest stream podmin init wrote.
func withSurge(manifest []byte) ([]byte, error) {
	docs := strings.Split(string(manifest), "\n---\n")
	for i, d := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			return nil, err
		}
		if obj["kind"] != "DaemonSet" {
			continue
		}
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			return nil, fmt.Errorf("the DaemonSet has no spec")
		}
		spec["updateStrategy"] = map[string]any{"type": "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": 0}}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		docs[i] = strings.TrimSuffix(string(b), "\n")
		return []byte(strings.Join(docs, "\n---\n")), nil
	}
	return nil, fmt.Errorf("no DaemonSet in the manifest")
}

// surgeRollout is proof 4b. It runs only once podmin validate accepts
// maxSurge: a node of NodeGroup solo joins the cluster (setup names the
// NodeGroup), runs solo with a Service, and rolls it to hello:v2 under the
// client entering through that node; every look at its Pods API must find
// a ready Pod of solo and no request may fail.
func (r *run) surgeRollout(p *e2enode.Proof) {
	file := filepath.Join(r.dir, "solo.yaml")
	if _, err := r.podmin(nil, "init", solo, "--image", "hello:v1", "-g", solo, "--service", "-f", file); err != nil {
		p.Fatal(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		p.Fatal(err)
	}
	surge, err := withSurge(raw)
	if err != nil {
		p.Fatal(err)
	}
	if err := os.WriteFile(file, surge, 0o644); err != nil {
		p.Fatal(err)
	}
	if _, err := r.podmin(nil, "validate", "-f", file); err != nil {
		line := regexp.MustCompile(`(?m)^.*maxSurge.*$`).FindString(err.Error())
		if line == "" {
			p.Fatalf("podmin validate of a DaemonSet with maxSurge 1: %v", err)
		}
		p.NotRun("podmin validate refuses maxSurge: " + strings.TrimSpace(line))
	}
	start := time.Now()
	r.setup(fmt.Sprintf("%s,size=%d", workers, len(r.liveNodes(workers))), solo+",size=1")
	n, err := r.newNode(len(r.allNodes())+1, solo)
	if err == nil {
		r.addNode(n)
		err = r.startNode(n)
	}
	if err != nil {
		p.Fatalf("the %s node: %v", solo, err)
	}
	if _, err := r.podmin(nil, "deploy", solo, "-g", solo, "-f", file, "--wait", "--timeout", "5m"); err != nil {
		p.Fatal(err)
	}
	p.Figure("setup with NodeGroup %s, its node %s up and %s deployed with maxSurge 1 in %s", solo, n.id, solo, time.Since(start).Round(10*time.Millisecond))
	entries := func() []*node { return []*node{n} }
	l := r.startLoad("default", solo, entries)
	time.Sleep(baseline)
	deploy := time.Now()
	_, derr := r.podmin(nil, "deploy", solo, "-g", solo, "-f", file, "--image", "hello:v2", "--wait", "--timeout", "5m")
	took := time.Since(deploy)
	var done time.Time
	werr := r.waitErr(5*time.Minute, "solo's node serving hello:v2", func() bool {
		for _, s := range l.snapshot() {
			if s.err == nil && s.version == "v2" && s.at.After(deploy) {
				done = s.at
				return true
			}
		}
		return false
	})
	time.Sleep(tail)
	shots := tallyShots(l.stop(), deploy.Add(-baseline), time.Now())
	if derr != nil {
		p.Errorf("podmin deploy --wait: %v", derr)
	}
	if werr != nil {
		p.Error(werr)
	}
	p.Figure("podmin deploy --wait (hello:v1 → hello:v2) returned after %s; first v2 answer %s", took.Round(10*time.Millisecond), offset(done, deploy))
	p.Figure("client through %s: %s", n.id, shots.summary(deploy))
	if shots.failed > 0 {
		p.Errorf("%d of %d requests failed: %s", shots.failed, shots.sent, shots.failureList(deploy, 12, podNamer(r.pods.snapshot(), deploy), r.planes.snapshot()))
	}
	empty := 0
	var firstEmpty time.Time
	looks := 0
	for _, rd := range r.pods.snapshot() {
		if rd.at.Before(deploy) || rd.at.After(done.Add(tail)) {
			continue
		}
		looks++
		if _, unknown := rd.errs[n.id]; unknown || rd.readyCount(n.id, solo) == 0 {
			if empty == 0 {
				firstEmpty = rd.at
			}
			empty++
		}
	}
	if empty > 0 {
		p.Errorf("%d of %d looks at %s's Pods API found no ready Pod of %s (or no answer), first at %s", empty, looks, n.id, solo, offset(firstEmpty, deploy))
	} else {
		p.Figure("a ready Pod of %s at each of %d looks at %s's Pods API", solo, looks, n.id)
	}
}
