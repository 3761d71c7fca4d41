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

// surgeRollout is proof 4b: a node of NodeGroup solo joins the cluster
// (setup names the NodeGroup), runs solo with a Service under maxSurge 1,
// and rolls it to hello:v2 under the client entering through that node,
// until its kubelet runs the new Pod alone. Every look at its Pods API
// must find a ready Pod of solo (never more than two), no request may
// fail, and the old Pod's address must leave every node's dataplane
// before the Pod stops.
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
	var from string
	if werr := r.waitErr(time.Minute, "a ready Pod of solo seen by the sampler", func() bool {
		rounds := r.pods.snapshot()
		ok, rev := rounds[len(rounds)-1].serving(n.id, solo)
		from = rev
		return ok
	}); werr != nil {
		p.Fatal(werr)
	}
	entries := func() []*node { return []*node{n} }
	l := r.startLoad("default", solo, entries)
	time.Sleep(baseline)
	deploy := time.Now()
	_, derr := r.podmin(nil, "deploy", solo, "-g", solo, "-f", file, "--image", "hello:v2", "--wait", "--timeout", "5m")
	took := time.Since(deploy)
	var answered, alone time.Time
	werr := r.waitErr(5*time.Minute, "solo's node running the new revision alone, and serving it", func() bool {
		if answered.IsZero() {
			for _, s := range l.snapshot() {
				if s.err == nil && s.version == "v2" && s.at.After(deploy) {
					answered = s.at
					break
				}
			}
		}
		rounds := r.pods.snapshot()
		last := rounds[len(rounds)-1]
		if !last.at.After(deploy) || answered.IsZero() {
			return false
		}
		var pods []podState
		for _, ps := range last.pods[n.id] {
			if ps.service == solo {
				pods = append(pods, ps)
			}
		}
		if len(pods) == 1 && pods[0].ready && pods[0].revision != from {
			alone = last.at
			return true
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
	end := alone
	if end.IsZero() {
		end = time.Now()
	}
	p.Figure("podmin deploy --wait (hello:v1 → hello:v2) returned after %s; first v2 answer %s; the old Pod gone from kubelet's list %s",
		took.Round(10*time.Millisecond), offset(answered, deploy), offset(alone, deploy))
	p.Figure("client through %s: %s", n.id, shots.summary(deploy))
	if shots.failed > 0 {
		p.Errorf("%d of %d requests failed: %s", shots.failed, shots.sent, shots.failureList(deploy, 12, podNamer(r.pods.snapshot(), deploy), r.planes.snapshot()))
	}
	r.surgeLooks(p, n, from, deploy, end)
}

// surgeLooks reports what the Pods API sampler saw of solo's node from
// the deploy to end (and the tail): a ready Pod at every look and never
// more than two, when the second Pod started and became ready, and
// whether the old Pod's address left every node's dataplane before it
// stopped.
func (r *run) surgeLooks(p *e2enode.Proof, n *node, from string, deploy, end time.Time) {
	rounds := r.pods.snapshot()
	empty, looks, most := 0, 0, 0
	var firstEmpty, newSeen, newReady, oldLast time.Time
	var newName string
	for _, rd := range rounds {
		if rd.at.Before(deploy) || rd.at.After(end.Add(tail)) {
			continue
		}
		looks++
		if _, unknown := rd.errs[n.id]; unknown || rd.readyCount(n.id, solo) == 0 {
			if empty == 0 {
				firstEmpty = rd.at
			}
			empty++
		}
		count := 0
		for _, ps := range rd.pods[n.id] {
			if ps.service != solo {
				continue
			}
			count++
			switch {
			case ps.revision == from && ps.ready && !ps.deleting:
				oldLast = rd.at
			case ps.revision != from && newSeen.IsZero():
				newSeen, newName = rd.at, ps.name
			}
			if ps.revision != from && ps.ready && newReady.IsZero() {
				newReady = rd.at
			}
		}
		most = max(most, count)
	}
	if empty > 0 {
		p.Errorf("%d of %d looks at %s's Pods API found no ready Pod of %s (or no answer), first at %s", empty, looks, n.id, solo, offset(firstEmpty, deploy))
	} else {
		p.Figure("a ready Pod of %s at each of %d looks at %s's Pods API, at most %d Pods of it at once", solo, looks, n.id, most)
	}
	if most > 2 {
		p.Errorf("%d Pods of %s at once on %s", most, solo, n.id)
	}
	p.Figure("the new Pod %s listed %s, ready %s; the old Pod last seen serving %s", newName, offset(newSeen, deploy), offset(newReady, deploy), offset(oldLast, deploy))
	old := servedAt(rounds, n.id, solo, from, deploy)
	live := ids(r.liveEvery())
	left, _ := leftEvery(r.planes.snapshot(), live, old, deploy, end.Add(tail))
	switch {
	case !old.IsValid():
		p.Errorf("the old Pod's address was never seen")
	case left.IsZero():
		p.Errorf("the old Pod's %s is still in some node's dataplane at the end", old)
	case left.After(oldLast):
		p.Errorf("the old Pod's %s left every dataplane %s, after it stopped serving %s", old, offset(left, deploy), offset(oldLast, deploy))
	default:
		p.Figure("the old Pod's %s out of every node's dataplane (%d nodes, read every %s) %s, %s before it stopped serving",
			old, len(live), planeEvery, offset(left, deploy), oldLast.Sub(left).Round(10*time.Millisecond))
	}
}
