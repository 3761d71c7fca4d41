// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
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
	// NodeGroup and Node (the node ID) place this node's leaf
	// replacements in the restart window (RestartOffset).
	NodeGroup, Node string
	// RestartWindow spreads leaf replacements, and so the restarts of
	// Pods, over this long after they become due (see RestartOffset);
	// 0 replaces at once. Zero means DefaultRestartWindow unless
	// NoRestartWindow is set; at most MaxRestartWindow.
	RestartWindow time.Duration
	// NoRestartWindow makes a zero RestartWindow mean "at once".
	NoRestartWindow bool
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
	// bundle is the hash of the ca.crt the Pod's generations hold.
	bundle [32]byte
	spec   string
	// untrustedSince is when the leaf was first seen not to chain to a
	// valid CA of the bundle; zero while it does.
	untrustedSince time.Time
	// capped says the leaf ends with its CA: no leaf of that CA can
	// replace it. renewableSince is when a CA that can was first seen.
	capped         bool
	renewableSince time.Time
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
	if opts.RestartWindow == 0 && !opts.NoRestartWindow {
		opts.RestartWindow = DefaultRestartWindow
	}
	if err := CheckRestartWindow(opts.RestartWindow); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
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

// Ensure makes the Pod's identity current and returns it: the cached leaf
// while it need not be replaced (its generations' ca.crt brought up to
// date in place), a leaf adopted from the node after a restart, or a
// newly issued one in a new generation. When a leaf is replaced is
// replaceAt's rule: never for a changed bundle alone, and otherwise at
// the Pod's point of the restart window.
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
	if ok && !generationIntact(m.PodDir(p.Name), cached.gen) {
		// The cache remembers a leaf whose files are gone (the Pod's
		// directory was removed): it vouches for nothing it did not check.
		m.log.Warn("workload identity files missing: issuing them again", "pod", p.Name, "generation", cached.gen)
		ok = false
		m.mu.Lock()
		delete(m.leaves, p.Name)
		m.mu.Unlock()
	}
	if !ok {
		if adopted, err := m.adopt(p, t, now); err == nil {
			cached, ok = adopted, true
		}
	}
	if ok {
		observe(&cached, t, now)
		if !m.due(p.Name, cached, t, spec, now) {
			if err := m.updateBundle(p.Name, &cached, t); err != nil {
				return Identity{}, err
			}
			m.remember(p.Name, cached)
			return Identity{Revision: cached.revision, NotAfter: cached.notAfter}, nil
		}
	}
	ls, err := m.issue(p, t, now)
	if err != nil {
		if ok {
			m.remember(p.Name, cached)
		}
		return Identity{}, err
	}
	m.remember(p.Name, ls)
	return Identity{Revision: ls.revision, NotAfter: ls.notAfter, Issued: true}, nil
}

// updateBundle rewrites ca.crt in place in the Pod's generations when the
// bundle changed since they were written: the Pod keeps running, and its
// containers see the new file.
func (m *Manager) updateBundle(pod string, l *leafState, t *trust) error {
	if l.bundle == t.hash {
		return nil
	}
	if err := replaceCA(m.PodDir(pod), t.bundle); err != nil {
		return fmt.Errorf("update ca.crt of Pod %s: %w", pod, err)
	}
	l.bundle = t.hash
	m.log.Debug("workload CA bundle updated in place", "pod", pod)
	return nil
}

func (m *Manager) remember(pod string, l leafState) {
	m.mu.Lock()
	m.leaves[pod] = l
	m.mu.Unlock()
}

// adopt takes over the generation already on the node (after an agent
// restart) when it is complete and its leaf is one this cluster's CA
// issued for these names: restarting the agent must not restart every
// Pod. Whether the leaf is due is Ensure's question, as for any other.
func (m *Manager) adopt(p Pod, t *trust, now time.Time) (leafState, error) {
	gen, g, err := readGeneration(m.PodDir(p.Name))
	if err != nil {
		return leafState{}, err
	}
	certs, err := pki.ParseCertsPEM(g.cert)
	if err != nil || len(certs) != 1 {
		return leafState{}, fmt.Errorf("tls.crt: %v", err)
	}
	leaf := certs[0]
	key, err := pki.ParseKeyPEM(g.key)
	if err != nil {
		return leafState{}, err
	}
	issuer := issuerOf(leaf, t)
	if issuer == nil {
		return leafState{}, errors.New("tls.crt was not issued by a CA of the bundle")
	}
	// Check it as of a moment the leaf and its CA were both valid: an
	// expired leaf is adopted too, and replaced at its point of the
	// window.
	at := now
	if !trustedAt(leaf, issuer, now) {
		at = latest(leaf.NotBefore, issuer.NotBefore).Add(time.Second)
	}
	spec := pki.WorkloadLeaf(m.opts.Cluster, p.Namespace, p.Name, p.Service)
	if err := pki.CheckLeaf(leaf, key, spec, []*x509.Certificate{issuer}, at); err != nil {
		return leafState{}, err
	}
	bundle := sha256.Sum256(g.ca)
	return leafState{gen: gen, revision: pki.Fingerprint(leaf), notAfter: leaf.NotAfter,
		bundle: bundle, spec: p.specKey(), capped: !leaf.NotAfter.Before(issuer.NotAfter)}, nil
}

// issuerOf returns the CA of the bundle that signed leaf, nil if none.
func issuerOf(leaf *x509.Certificate, t *trust) *x509.Certificate {
	for _, c := range t.state.Certs() {
		if leaf.CheckSignatureFrom(c) == nil {
			return c
		}
	}
	return nil
}

// trustedAt reports whether leaf and its issuer are both valid at now.
func trustedAt(leaf, issuer *x509.Certificate, now time.Time) bool {
	return !now.Before(leaf.NotBefore) && now.Before(leaf.NotAfter) && !now.Before(issuer.NotBefore) && now.Before(issuer.NotAfter)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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
	if previous != "" && previous != gen {
		// The previous generation stays for the Pod until it restarts
		// onto the new one: it gets the current bundle too.
		if err := replaceCA(dir, t.bundle); err != nil {
			m.log.Warn("could not update ca.crt of the previous identity generation", "pod", p.Name, "err", err)
		}
	}
	m.log.Debug("workload leaf issued", "pod", p.Name, "namespace", p.Namespace, "revision", fp, "notAfter", leaf.NotAfter,
		"issuer", pki.Fingerprint(issuer)[:16])
	return leafState{gen: gen, revision: fp, notAfter: leaf.NotAfter, bundle: t.hash, spec: p.specKey(),
		capped: !leaf.NotAfter.Before(issuer.NotAfter)}, nil
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
// deployment index is unchanged: a Pod's ca.crt is behind the bundle, or
// a leaf's replacement time has come. It records when leaves were first
// seen untrusted, which places their replacement in the window.
func (m *Manager) Due() bool {
	next, ok := m.NextDue()
	return ok && !m.opts.Now().Before(next)
}

// NextDue returns the earliest moment a pass has work: now when a Pod's
// ca.crt is behind the bundle, otherwise the earliest leaf replacement;
// false when there is none.
func (m *Manager) NextDue() (time.Time, bool) {
	now := m.opts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.trust == nil {
		return time.Time{}, false
	}
	var next time.Time
	found := false
	for pod, l := range m.leaves {
		observe(&l, m.trust, now)
		m.leaves[pod] = l
		at, ok := m.replaceAt(pod, l, m.trust, l.spec, now)
		if l.bundle != m.trust.hash {
			at, ok = now, true
		}
		if ok && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	return next, found
}
