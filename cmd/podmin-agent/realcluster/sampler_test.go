// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/bpf"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
)

// Sampling periods: kubelet's Pods API of every node, and every node's
// dataplane maps.
const (
	podsEvery  = 100 * time.Millisecond
	planeEvery = 250 * time.Millisecond
)

// podSampler reads every node's Pods API each podsEvery, as the agent
// does, so a proof sees which revision each node serves and when.
type podSampler struct {
	nodes  func() []*node
	mu     sync.Mutex
	rounds []round
	quit   chan struct{}
	done   chan struct{}
}

// sampleEvery calls sample every d until quit closes, then closes done.
func sampleEvery(d time.Duration, quit <-chan struct{}, done chan<- struct{}, sample func()) {
	go func() {
		defer close(done)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			sample()
		}
	}()
}

func startPodSampler(nodes func() []*node) *podSampler {
	s := &podSampler{nodes: nodes, quit: make(chan struct{}), done: make(chan struct{})}
	s.sample() // a proof may read a round at once
	sampleEvery(podsEvery, s.quit, s.done, s.sample)
	return s
}

// sample takes one round, asking the nodes at once.
func (s *podSampler) sample() {
	r := round{at: time.Now(), pods: map[string][]podState{}, errs: map[string]error{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range s.nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps, err := e2enode.ListPods(n.cfg.HostPath(e2enode.PodsAPISock))
			var states []podState
			for _, p := range ps {
				ip, _ := netip.ParseAddr(p.Status.PodIP)
				states = append(states, podState{name: p.Name, revision: p.Annotations[nodepod.RevisionAnnotation],
					service: p.Annotations[manifest.ServiceAnnotation], ip: ip, ready: pods.IsReady(p), deleting: p.DeletionTimestamp != nil})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.errs[n.id] = err
			} else {
				r.pods[n.id] = states
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	s.rounds = append(s.rounds, r)
	s.mu.Unlock()
}

// snapshot returns the rounds so far.
func (s *podSampler) snapshot() []round {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]round(nil), s.rounds...)
}

func (s *podSampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

// planeSampler reads the backends each node's pinned dataplane holds
// each planeEvery.
type planeSampler struct {
	nodes    func() []*node
	prefixes func() []netip.Prefix
	mu       sync.Mutex
	samples  []planeSample
	quit     chan struct{}
	done     chan struct{}
}

func startPlaneSampler(nodes func() []*node, prefixes func() []netip.Prefix) *planeSampler {
	s := &planeSampler{nodes: nodes, prefixes: prefixes, quit: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	sampleEvery(planeEvery, s.quit, s.done, s.sample)
	return s
}

// sample reads every node's dataplane once.
func (s *planeSampler) sample() {
	now := time.Now()
	pfx := s.prefixes()
	var batch []planeSample
	for _, n := range s.nodes() {
		b, err := backends(n.cfg.HostPath(dataplane.DefaultPinPath), pfx)
		batch = append(batch, planeSample{at: now, node: n.id, backends: b, err: err})
	}
	s.mu.Lock()
	s.samples = append(s.samples, batch...)
	s.mu.Unlock()
}

func (s *planeSampler) snapshot() []planeSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]planeSample(nil), s.samples...)
}

func (s *planeSampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

// backends reads the backend map of every generation the dataplane
// pinned beneath pin and returns the addresses inside prefixes it holds.
// It reads the values as bytes, looking for 16-byte addresses at every
// 4-byte offset, so it needs no knowledge of the map's layout beyond
// that; the agent deletes the slots a smaller backend set leaves.
func backends(pin string, prefixes []netip.Prefix) ([]netip.Addr, error) {
	dirs, err := os.ReadDir(pin)
	if err != nil {
		return nil, err
	}
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	found := false
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "links" || strings.HasPrefix(d.Name(), "new-") {
			continue
		}
		m, err := ebpf.LoadPinnedMap(filepath.Join(pin, d.Name(), bpf.VipMapBackends), &ebpf.LoadPinOptions{ReadOnly: true})
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		k, v := make([]byte, m.KeySize()), make([]byte, m.ValueSize())
		it := m.Iterate()
		for it.Next(&k, &v) {
			for off := 0; off+16 <= len(v); off += 4 {
				a := netip.AddrFrom16([16]byte(v[off : off+16]))
				for _, p := range prefixes {
					if p.Contains(a) && !seen[a] && !bytes.Equal(v[off:off+16], make([]byte, 16)) {
						seen[a] = true
						out = append(out, a)
					}
				}
			}
		}
		err = it.Err()
		m.Close()
		if err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, nil // no dataplane programmed (yet): no backends
	}
	return out, nil
}

// flowBackend is the backend node n's dataplane holds for the client's
// TCP flow from client:sport to vip:443, read from its pinned forward
// flow map (a key of the client's and the VIP's addresses, both ports in
// network order and the protocol; the backend's address leads the
// value); invalid when it cannot be read.
func flowBackend(n *node, client, vip netip.Addr, sport int) netip.Addr {
	pin := n.cfg.HostPath(dataplane.DefaultPinPath)
	dirs, err := os.ReadDir(pin)
	if err != nil {
		return netip.Addr{}
	}
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "links" || strings.HasPrefix(d.Name(), "new-") {
			continue
		}
		m, err := ebpf.LoadPinnedMap(filepath.Join(pin, d.Name(), bpf.VipMapForwardFlows), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			continue
		}
		key := make([]byte, 0, 40)
		c, v := client.As16(), vip.As16()
		key = append(append(key, c[:]...), v[:]...)
		key = append(key, byte(sport>>8), byte(sport), 443>>8, 443&0xff, 6, 0, 0, 0)
		if int(m.KeySize()) == len(key) && m.ValueSize() >= 16 {
			val := make([]byte, m.ValueSize())
			if m.Lookup(key, &val) == nil {
				m.Close()
				return netip.AddrFrom16([16]byte(val[:16]))
			}
		}
		m.Close()
	}
	return netip.Addr{}
}

// podNamer names a Pod address from the rounds: its node's Pod, its
// revision and when it was last seen ready.
func podNamer(rounds []round, origin time.Time) func(netip.Addr) string {
	type seen struct {
		node, name, rev string
		last            time.Time
	}
	by := map[netip.Addr]seen{}
	for _, r := range rounds {
		for node, ps := range r.pods {
			for _, p := range ps {
				if p.ip.IsValid() && p.ready {
					by[p.ip] = seen{node, p.name, p.revision, r.at}
				}
			}
		}
	}
	return func(a netip.Addr) string {
		if !a.IsValid() {
			return ""
		}
		s, ok := by[a]
		if !ok {
			return a.String() + " (never seen as a ready Pod)"
		}
		return fmt.Sprintf("%s (%s on %s, revision %s, last seen ready %s)", a, s.name, s.node, short(s.rev), offset(s.last, origin))
	}
}
