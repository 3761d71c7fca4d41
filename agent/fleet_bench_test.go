// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/state"
)

// Settings of BenchmarkFleet, from the environment.
const (
	// EnvFleetNodes is the number of agents (default 100).
	envFleetNodes = "PODMIN_FLEET_NODES"
	// envFleetEntries lists the index sizes, comma-separated (default
	// 10,100,1000,10000).
	envFleetEntries = "PODMIN_FLEET_ENTRIES"
	// envFleetCommits is the number of commits measured per size
	// (default 20), one every envFleetInterval (default 2s) or when the
	// previous one has reached every node, whichever is later.
	envFleetCommits  = "PODMIN_FLEET_COMMITS"
	envFleetInterval = "PODMIN_FLEET_INTERVAL"
	// envFleetIdle is the idle window whose requests are counted (default
	// 1m).
	envFleetIdle = "PODMIN_FLEET_IDLE"
)

func envValue[T any](b *testing.B, name string, def T, parse func(string) (T, error)) T {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	out, err := parse(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// BenchmarkFleet runs PODMIN_FLEET_NODES agents (default 100; 1,000 run
// on a 2-core machine) on one versitygw bucket with the production
// timing: the election's 5 s renewals, the leader's 0.5 s index poll,
// hints and 2 s heartbeats, the followers' safety poll (vouched by the
// heartbeats: 2 s per node, at least 1 min). For each index size it starts
// the fleet (about ten nodes and at most 100 deployments per NodeGroup,
// at most 100 NodeGroups, of uneven sizes), commits a new image of one deployment of a random
// NodeGroup at a steady rate, and then leaves the fleet idle. It reports:
//
//   - B/node/unrelated-commit: body bytes a node read for a commit to
//     another NodeGroup (meta-B/… the index metadata its HEAD returned,
//     req/… its requests);
//   - B/node/related-commit: index and view bytes a node of the committed
//     NodeGroup read, with view-B the size of that NodeGroup's view
//     (payload-B/… the new Pod payload it read);
//   - ms/commit-to-file-p50 and -p99: from the commit to each node of the
//     NodeGroup having published it (ms/commit-to-leader-hint-p50: to the
//     leader's poll finding it; ms/commit-to-node-hint-p50: to the hint
//     reaching a node of the NodeGroup; a hint that came before the
//     commit returned counts as 0);
//   - req/min/idle-fleet: every bucket request of every agent while idle
//     (the election included);
//   - leader-CPU-ms/commit and leader-CPU-%-idle: CPU time of the leader
//     agent's goroutines (its poll, views, snapshot and API serving the
//     followers), from a CPU profile labelled by node.
//
// Run it with go test ./agent -run '^$' -bench Fleet -benchtime 1x.
func BenchmarkFleet(b *testing.B) {
	nodes := envValue(b, envFleetNodes, 100, strconv.Atoi)
	sizes := envValue(b, envFleetEntries, []int{10, 100, 1000, 10000}, parseInts)
	commits := envValue(b, envFleetCommits, 20, strconv.Atoi)
	interval := envValue(b, envFleetInterval, 2*time.Second, time.ParseDuration)
	idle := envValue(b, envFleetIdle, time.Minute, time.ParseDuration)
	srv := objstoretest.StartVersityGW(b)
	for _, entries := range sizes {
		b.Run(fmt.Sprintf("nodes=%d/entries=%d", nodes, entries), func(b *testing.B) {
			benchFleet(b, srv, nodes, entries, commits*b.N, interval, idle)
		})
	}
}

// fleetRoot is where the nodes' sandbox roots go: a tmpfs when the machine
// has one, since a thousand nodes write a thousand static Pod directories.
func fleetRoot(b *testing.B) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "podmin-fleet-")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}

func benchFleet(b *testing.B, srv *objstoretest.S3Server, nodes, entries, commits int, interval, idle time.Duration) {
	bucket := s3storetest.NewBucket(b, srv)
	// About ten nodes and at most a hundred deployments per NodeGroup,
	// at most a hundred NodeGroups.
	ngCount := max(1, min(100, max(nodes/10, (entries+99)/100)))
	ngs := fleetNodeGroups(ngCount)
	setup := time.Now()
	keys := seedIndex(b, bucket, ngs, entries)
	f := startFleet(b, bucket, fleetOptions{nodes: nodes, nodegroups: ngCount, root: fleetRoot(b)})
	b.Logf("%d nodes in %d NodeGroups on a %d-entry index: started and converged in %s", nodes, ngCount, entries, time.Since(setup).Round(time.Second))
	byNG := map[string][]state.Key{}
	for _, k := range keys {
		byNG[k.NodeGroup] = append(byNG[k.NodeGroup], k)
	}
	var withEntries []string
	for _, ng := range ngs {
		if len(byNG[ng]) > 0 {
			withEntries = append(withEntries, ng)
		}
	}
	leader := f.leader()
	if leader == nil {
		b.Fatal("no single leader")
	}
	r := rand.New(rand.NewPCG(uint64(entries), uint64(nodes)))
	b.ResetTimer()
	cpu := startCPUProfile(b)
	var (
		all                     []fleetCommit
		latencies, hints, found []time.Duration
		commitStart             = time.Now()
		related, unrelated      nodeCounts
		nRelated, nUnrelated    int
		viewBytes, viewsCounted int64
	)
	for i := range commits {
		next := time.Now().Add(interval)
		ng := withEntries[r.IntN(len(withEntries))]
		key := byNG[ng][r.IntN(len(byNG[ng]))]
		c := f.commit(b, ng, key, fmt.Sprintf("app:c%d", i+1), 2*time.Minute, nil)
		all = append(all, c)
		latencies = append(latencies, c.latency...)
		hints, found = append(hints, c.hinted...), append(found, c.found)
		related, nRelated = related.add(c.related), nRelated+c.nRelated
		unrelated, nUnrelated = unrelated.add(c.unrelated), nUnrelated+c.nUnrelated
		viewBytes += int64(c.viewBytes * c.nRelated)
		viewsCounted += int64(c.nRelated)
		time.Sleep(time.Until(next))
	}
	commitPhase := time.Since(commitStart)
	commitCPU := cpu.stop(b)
	b.StopTimer()
	if f.leader() != leader {
		b.Fatalf("the leader changed during the commits (was %s)", leader.id)
	}

	// Idle: every request of every agent, the election's included.
	before := f.counts()
	beforeCoord := f.coordCounts()
	cpu = startCPUProfile(b)
	idleStart := time.Now()
	time.Sleep(idle)
	idleCPU := cpu.stop(b)
	idleFor := time.Since(idleStart)
	var idleRequests, leaderIdle int64
	after, afterCoord := f.counts(), f.coordCounts()
	for i := range after {
		n := after[i].sub(before[i]).requests + afterCoord[i].sub(beforeCoord[i]).requests
		idleRequests += n
		if f.nodes[i] == leader {
			leaderIdle = n
		}
	}
	if f.leader() != leader {
		b.Fatalf("the leader changed while idle (was %s)", leader.id)
	}

	per := func(total int64, n int) float64 { return float64(total) / float64(max(n, 1)) }
	slices.Sort(latencies)
	slices.Sort(hints)
	slices.Sort(found)
	pctOf := func(d []time.Duration, p float64) float64 {
		if len(d) == 0 {
			return 0
		}
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	pct := func(p float64) float64 { return pctOf(latencies, p) }
	b.ReportMetric(per(unrelated.indexBody+unrelated.viewBody+unrelated.otherBody, nUnrelated), "B/node/unrelated-commit")
	b.ReportMetric(per(unrelated.indexMeta, nUnrelated), "meta-B/node/unrelated-commit")
	b.ReportMetric(per(unrelated.requests, nUnrelated), "req/node/unrelated-commit")
	b.ReportMetric(per(related.indexBody+related.viewBody, nRelated), "B/node/related-commit")
	b.ReportMetric(per(related.otherBody, nRelated), "payload-B/node/related-commit")
	b.ReportMetric(float64(viewBytes)/float64(max(viewsCounted, 1)), "view-B")
	b.ReportMetric(pct(0.50), "ms/commit-to-file-p50")
	b.ReportMetric(pct(0.99), "ms/commit-to-file-p99")
	b.ReportMetric(pctOf(found, 0.50), "ms/commit-to-leader-hint-p50")
	b.ReportMetric(pctOf(hints, 0.50), "ms/commit-to-node-hint-p50")
	b.ReportMetric(float64(idleRequests)*float64(time.Minute)/float64(idleFor), "req/min/idle-fleet")
	b.ReportMetric(float64(commitCPU[leader.id].Microseconds())/1000/float64(len(all)), "leader-CPU-ms/commit")
	b.ReportMetric(100*idleCPU[leader.id].Seconds()/idleFor.Seconds(), "leader-CPU-%-idle")
	b.Logf("%d commits in %s (%d node publications); idle %s: %d requests, %d of them the leader's", len(all), commitPhase.Round(time.Millisecond), len(latencies), idleFor.Round(time.Second), idleRequests, leaderIdle)
	b.Logf("unrelated: %d node-commits, %d requests, %d index + %d view + %d other body bytes, %d metadata bytes",
		nUnrelated, unrelated.requests, unrelated.indexBody, unrelated.viewBody, unrelated.otherBody, unrelated.indexMeta)
	b.Logf("related: %d node-commits, %d requests, %d index + %d view + %d payload bytes, %d index GETs",
		nRelated, related.requests, related.indexBody, related.viewBody, related.otherBody, related.indexGets)
}

// coordCounts are the nodes' coordinators' counters.
func (f *fleet) coordCounts() []nodeCounts {
	out := make([]nodeCounts, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.coordB.counts()
	}
	return out
}

// cpuProfile is a running CPU profile.
type cpuProfile struct{ buf bytes.Buffer }

func startCPUProfile(b *testing.B) *cpuProfile {
	p := &cpuProfile{}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		b.Fatalf("CPU profile: %v (run without -cpuprofile)", err)
	}
	return p
}

// stop ends the profile and returns the CPU time per node label.
func (p *cpuProfile) stop(b *testing.B) map[string]time.Duration {
	pprof.StopCPUProfile()
	out, err := cpuByLabel(p.buf.Bytes(), "node")
	if err != nil {
		b.Fatalf("read the CPU profile: %v", err)
	}
	return out
}

// cpuByLabel sums the CPU time of a pprof profile's samples by the value
// of one label. It reads the profile's protobuf encoding directly:
// sample_type (1), sample (2: value 2, label 3 with key 1 and str 2) and
// string_table (6).
func cpuByLabel(data []byte, key string) (map[string]time.Duration, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	type sample struct {
		values []int64
		labels [][2]int64
	}
	var (
		strs    []string
		types   []int64
		samples []sample
	)
	err = eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) error {
				if num == 1 {
					types = append(types, int64(n))
				}
				return nil
			})
		case num == 2 && typ == protowire.BytesType:
			var s sample
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
				switch {
				case num == 2 && typ == protowire.BytesType:
					for len(v) > 0 {
						x, l := protowire.ConsumeVarint(v)
						if l < 0 {
							return errors.New("bad packed value")
						}
						s.values, v = append(s.values, int64(x)), v[l:]
					}
				case num == 2:
					s.values = append(s.values, int64(n))
				case num == 3 && typ == protowire.BytesType:
					var kv [2]int64
					if err := eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) error {
						if num == 1 || num == 2 {
							kv[num-1] = int64(n)
						}
						return nil
					}); err != nil {
						return err
					}
					s.labels = append(s.labels, kv)
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case num == 6 && typ == protowire.BytesType:
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	cpu := slices.IndexFunc(types, func(t int64) bool { return str(t) == "cpu" })
	if cpu < 0 {
		return nil, errors.New("the profile has no cpu samples")
	}
	out := map[string]time.Duration{}
	for _, s := range samples {
		if cpu >= len(s.values) {
			continue
		}
		for _, l := range s.labels {
			if str(l[0]) == key {
				out[str(l[1])] += time.Duration(s.values[cpu])
			}
		}
	}
	return out, nil
}

// eachField calls fn for every field of a protobuf message: v is the
// payload of a bytes field, n the value of a varint or fixed field.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return errors.New("bad tag")
		}
		b = b[l:]
		var (
			v []byte
			n uint64
		)
		switch typ {
		case protowire.VarintType:
			n, l = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		case protowire.Fixed64Type:
			n, l = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var x uint32
			x, l = protowire.ConsumeFixed32(b)
			n = uint64(x)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return errors.New("bad field")
		}
		b = b[l:]
		if err := fn(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}
