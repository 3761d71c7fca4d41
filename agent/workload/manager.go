// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/pki"
)

// Options configure a Manager.
type Options struct {
	// Store is the cluster bucket (identity/ca.json).
	Store Objects
	// Cluster is the cluster ID (trust domain and CA subject).
	Cluster string
	// Root is the node root the node paths hang off ("/" in production,
	// PODMIN_ROOT in local mode).
	Root string
	// Key is the workload CA key (ReadKey); it never leaves memory.
	Key ed25519.PrivateKey
	// Leader says whether this agent rotates the CA; nil means Always.
	Leader Leader
	// External is the --workload-ca-publish destination; nil when unset.
	External *External
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Random is the randomness for keys and serials; nil means crypto/rand.
	Random io.Reader
	// Log receives progress; nil discards it.
	Log *slog.Logger
	// Concurrency bounds EnsureAll's parallel issuance; 0 means 4.
	Concurrency int
}

// Pod is what a Pod's identity depends on.
type Pod struct {
	Name, Namespace string
	// Service is the podmin.dev/service annotation's value, "" without one.
	Service string
}

// Identity is a Pod's current leaf.
type Identity struct {
	// Revision is the leaf's fingerprint: the value of
	// podmin.dev/identity-revision.
	Revision string
	// NotAfter is the leaf's expiry.
	NotAfter time.Time
	// Issued reports that this call wrote a new generation.
	Issued bool
}

// leafState is what the Manager remembers of a Pod's current generation.
type leafState struct {
	gen      string
	revision string
	notAfter time.Time
	bundle   [32]byte
	spec     string
}

// Manager issues and renews the node's workload leaves. It is safe for
// concurrent use; calls for one Pod are serialized.
type Manager struct {
	opts     Options
	log      *slog.Logger
	workRoot string
	mu       sync.RWMutex
	trust    *trust
	leaves   map[string]leafState
	locks    [64]sync.Mutex
	// leaderMu serializes Rotate; leaderState is the last parsed
	// identity/ca.json at leaderETag, so an idle leader pass is one
	// conditional read.
	leaderMu    sync.Mutex
	leaderState *pki.CAState
	leaderETag  string
}

// New checks the options and returns a Manager with no CA state: call
// Refresh before Ensure.
func New(opts Options) (*Manager, error) {
	switch {
	case opts.Store == nil:
		return nil, errors.New("workload: no object store: pass the cluster bucket")
	case len(opts.Key) != ed25519.PrivateKeySize:
		return nil, errors.New("workload: no workload CA key: read it with ReadKey")
	case opts.Root == "":
		return nil, errors.New("workload: no node root: pass \"/\" or a sandbox directory")
	}
	if err := ids.ValidateCluster(opts.Cluster); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	if opts.Leader == nil {
		opts.Leader = Always{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Random == nil {
		opts.Random = rand.Reader
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		opts: opts, log: log, leaves: map[string]leafState{},
		workRoot: filepath.Join(opts.Root, filepath.FromSlash(nodepod.WorkloadsDir)),
	}, nil
}

// PodDir is the node directory of a Pod's identity: its generations and
// the identity symlink live in it.
func (m *Manager) PodDir(pod string) string { return filepath.Join(m.workRoot, pod) }

// Bundle returns the current ca.crt bytes, nil before the first Refresh.
func (m *Manager) Bundle() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.trust == nil {
		return nil
	}
	return m.trust.bundle
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func (p Pod) check() error {
	for what, v := range map[string]string{"Pod name": p.Name, "namespace": p.Namespace} {
		if len(v) > 63 || !labelRE.MatchString(v) {
			return fmt.Errorf("workload identity: %s %q is not a DNS label", what, v)
		}
	}
	if p.Service != "" && (len(p.Service) > 63 || !labelRE.MatchString(p.Service)) {
		return fmt.Errorf("workload identity: Service %q is not a DNS label", p.Service)
	}
	return nil
}

func (p Pod) specKey() string { return p.Namespace + "/" + p.Service }

func (m *Manager) lock(pod string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(pod))
	return &m.locks[h.Sum32()%uint32(len(m.locks))]
}

// due reports whether l must be replaced under t at now.
func due(l leafState, t *trust, spec string, now time.Time) bool {
	return l.bundle != t.hash || l.spec != spec || !now.Before(l.notAfter.Add(-pki.RenewBefore))
}

// Ensure makes the Pod's identity current and returns it: the cached leaf
// when it is still good, a leaf adopted from the node after a restart, or
// a newly issued one in a new generation. A leaf is replaced when the CA
// bundle changed, its names changed, or it expires within six hours.
func (m *Manager) Ensure(ctx context.Context, p Pod) (Identity, error) {
	if err := p.check(); err != nil {
		return Identity{}, err
	}
	l := m.lock(p.Name)
	l.Lock()
	defer l.Unlock()
	if err := ctx.Err(); err != nil {
		return Identity{}, err
	}
	m.mu.RLock()
	t := m.trust
	cached, ok := m.leaves[p.Name]
	m.mu.RUnlock()
	if t == nil {
		return Identity{}, fmt.Errorf("%w: issuing nothing until identity/ca.json has been read", ErrNoCA)
	}
	now := m.opts.Now()
	spec := p.specKey()
	if ok && !due(cached, t, spec, now) {
		return Identity{Revision: cached.revision, NotAfter: cached.notAfter}, nil
	}
	if !ok {
		if adopted, err := m.adopt(p, t, now); err == nil {
			m.remember(p.Name, adopted)
			return Identity{Revision: adopted.revision, NotAfter: adopted.notAfter}, nil
		}
	}
	ls, err := m.issue(p, t, now)
	if err != nil {
		return Identity{}, err
	}
	m.remember(p.Name, ls)
	return Identity{Revision: ls.revision, NotAfter: ls.notAfter, Issued: true}, nil
}

func (m *Manager) remember(pod string, l leafState) {
	m.mu.Lock()
	m.leaves[pod] = l
	m.mu.Unlock()
}

// adopt takes over the generation already on the node (after an agent
// restart) when it is complete, matches the current bundle and names, and
// is not due: restarting the agent must not restart every Pod.
func (m *Manager) adopt(p Pod, t *trust, now time.Time) (leafState, error) {
	gen, g, err := readGeneration(m.PodDir(p.Name))
	if err != nil {
		return leafState{}, err
	}
	if string(g.ca) != string(t.bundle) {
		return leafState{}, errors.New("ca.crt differs from the current bundle")
	}
	certs, err := pki.ParseCertsPEM(g.cert)
	if err != nil || len(certs) != 1 {
		return leafState{}, fmt.Errorf("tls.crt: %v", err)
	}
	key, err := pki.ParseKeyPEM(g.key)
	if err != nil {
		return leafState{}, err
	}
	spec := pki.WorkloadLeaf(m.opts.Cluster, p.Namespace, p.Name, p.Service)
	if err := pki.CheckLeaf(certs[0], key, spec, t.state.Certs(), now); err != nil {
		return leafState{}, err
	}
	ls := leafState{gen: gen, revision: pki.Fingerprint(certs[0]), notAfter: certs[0].NotAfter, bundle: t.hash, spec: p.specKey()}
	if due(ls, t, ls.spec, now) {
		return leafState{}, errors.New("due for renewal")
	}
	return ls, nil
}

// issue signs a new leaf, writes it as a new generation, switches the
// symlink and prunes all but the previous generation.
func (m *Manager) issue(p Pod, t *trust, now time.Time) (leafState, error) {
	issuer, err := t.state.Issuer(now)
	if err != nil {
		return leafState{}, err
	}
	key, err := pki.GenerateKey(m.opts.Random)
	if err != nil {
		return leafState{}, err
	}
	spec := pki.WorkloadLeaf(m.opts.Cluster, p.Namespace, p.Name, p.Service)
	leaf, err := pki.Issue(m.opts.Random, issuer, m.opts.Key, key.Public().(ed25519.PublicKey), spec, now)
	if err != nil {
		return leafState{}, err
	}
	keyPEM, err := pki.EncodeKeyPEM(key)
	if err != nil {
		return leafState{}, err
	}
	fp := pki.Fingerprint(leaf)
	gen := fp[:32]
	dir := m.PodDir(p.Name)
	previous, err := writeGeneration(dir, gen, generation{cert: pki.EncodeCertPEM(leaf.Raw), key: keyPEM, ca: t.bundle})
	if err != nil {
		return leafState{}, fmt.Errorf("write the identity of Pod %s: %w", p.Name, err)
	}
	if err := pruneGenerations(dir, gen, previous); err != nil {
		m.log.Warn("could not remove old identity generations", "pod", p.Name, "err", err)
	}
	m.log.Debug("workload leaf issued", "pod", p.Name, "namespace", p.Namespace, "revision", fp, "notAfter", leaf.NotAfter)
	return leafState{gen: gen, revision: fp, notAfter: leaf.NotAfter, bundle: t.hash, spec: p.specKey()}, nil
}

// EnsureAll ensures every Pod's identity with bounded parallelism and
// returns the identities by Pod name. Pods that failed are absent from
// the map; their errors are joined.
func (m *Manager) EnsureAll(ctx context.Context, pods []Pod) (map[string]Identity, error) {
	out := make(map[string]Identity, len(pods))
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	work := make(chan Pod)
	for range min(m.opts.Concurrency, max(len(pods), 1)) {
		wg.Go(func() {
			for p := range work {
				id, err := m.Ensure(ctx, p)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("Pod %s/%s: %w", p.Namespace, p.Name, err))
				} else {
					out[p.Name] = id
				}
				mu.Unlock()
			}
		})
	}
	for _, p := range pods {
		work <- p
	}
	close(work)
	wg.Wait()
	return out, errors.Join(errs...)
}

// Due reports whether a reconciliation pass must run although the
// deployment index is unchanged: the bundle changed since a leaf was
// written, or a leaf expires within six hours.
func (m *Manager) Due() bool {
	now := m.opts.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.trust == nil {
		return false
	}
	for _, l := range m.leaves {
		if due(l, m.trust, l.spec, now) {
			return true
		}
	}
	return false
}
