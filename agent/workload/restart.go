// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"time"

	"podmin.dev/podmin/internal/pki"
)

// A new leaf restarts its Pod (kubelet sees a new
// podmin.dev/identity-revision), so the Manager never replaces the leaves
// of a fleet at one moment:
//
//   - A changed CA bundle is no reason to replace a leaf. ca.crt is
//     rewritten in place, atomically, in the Pod's current (and previous)
//     generation, which the Pod's identity volume mounts: running
//     containers see the new file without a restart. Every workload CA
//     certificate is made from the one stored key with the same subject,
//     so a leaf of the new certificate verifies with the old one until the
//     old one expires (30 days after the promotion at the earliest); by
//     then every Pod has restarted for its own renewals (each within 18
//     hours plus the window) and read the new bundle, even a process that
//     reads ca.crt only when it starts.
//   - A leaf that must be replaced (it enters its renewal window, or it no
//     longer chains to a valid CA of the bundle: it or every CA
//     certificate expired) is replaced at a point of the restart window
//     after that moment: RestartOffset of its NodeGroup, node and Pod
//     name. The replicas of one DaemonSet on the nodes of a NodeGroup, and
//     the Pods of one node, therefore restart at independent,
//     deterministic points spread over the window rather than together.
//   - A leaf that ends with its CA certificate (issued within a day of the
//     certificate's expiry, because the rotation was late) cannot be
//     renewed by that certificate: it is kept, not reissued in a loop, and
//     its window starts when a certificate that can renew it is seen.
//   - A Pod without a usable leaf on the node (a new Pod, a wiped tmpfs),
//     or whose names changed (its deployment changed, so it restarts
//     anyway), gets its leaf at once.

// Bounds of Options.RestartWindow.
const (
	// DefaultRestartWindow is the window when none is configured.
	DefaultRestartWindow = 30 * time.Minute
	// MaxRestartWindow keeps a renewal spread over the window an hour
	// ahead of the leaf's expiry.
	MaxRestartWindow = pki.RenewBefore - time.Hour
)

// CheckRestartWindow refuses a window outside [0, MaxRestartWindow].
func CheckRestartWindow(w time.Duration) error {
	if w < 0 || w > MaxRestartWindow {
		return fmt.Errorf("restart window %s is outside 0 to %s", w, MaxRestartWindow)
	}
	return nil
}

// RestartOffset is where in a window of length window the leaf of Pod
// pod on node node of NodeGroup nodeGroup is replaced, counted from the
// moment its replacement became due: window times the first 64 bits of
// SHA-256("podmin.dev/restart\x00" nodeGroup "\x00" node "\x00" pod),
// read as a fraction of 2^64. It depends on nothing else, so it is the
// same after an agent restart and can be computed by anyone who knows the
// three names.
func RestartOffset(nodeGroup, node, pod string, window time.Duration) time.Duration {
	if window <= 0 {
		return 0
	}
	h := sha256.Sum256([]byte("podmin.dev/restart\x00" + nodeGroup + "\x00" + node + "\x00" + pod))
	hi, _ := bits.Mul64(binary.BigEndian.Uint64(h[:8]), uint64(window))
	return time.Duration(hi)
}

// trusted reports whether l still chains, at now, to a valid CA of the
// bundle t: the leaf is unexpired and a certificate of the bundle (all
// are made from the one key that signed the leaf) is valid.
func trusted(l leafState, t *trust, now time.Time) bool {
	if !now.Before(l.notAfter) {
		return false
	}
	for _, c := range t.state.Certs() {
		if !now.Before(c.NotBefore) && now.Before(c.NotAfter) {
			return true
		}
	}
	return false
}

// replaceAt is when the leaf l of pod is to be replaced under t, judged
// at now, and whether it is to be replaced at all: for its names at once;
// untrusted, at its point of the window after it was first seen
// untrusted; otherwise at its point of the window after its renewal
// window opened, provided a new leaf would live longer. A leaf that ends
// with its CA (issued close to that CA's expiry) is kept, not replaced
// over and over, and its window starts when a CA that can renew it is
// first seen: a late rotation spreads its restarts too.
func (m *Manager) replaceAt(pod string, l leafState, t *trust, spec string, now time.Time) (time.Time, bool) {
	if l.spec != spec {
		return now, true
	}
	off := RestartOffset(m.opts.NodeGroup, m.opts.Node, pod, m.opts.RestartWindow)
	if !l.untrustedSince.IsZero() {
		return l.untrustedSince.Add(off), true
	}
	issuer, err := t.state.Issuer(now)
	if err != nil || !issuer.NotAfter.After(l.notAfter) {
		return time.Time{}, false
	}
	from := l.notAfter.Add(-pki.RenewBefore)
	if l.capped {
		if l.renewableSince.IsZero() {
			return time.Time{}, false // observe has not seen the CA yet
		}
		from = latest(from, l.renewableSince)
	}
	return from.Add(off), true
}

// due reports whether the leaf l of pod must be replaced at now.
func (m *Manager) due(pod string, l leafState, t *trust, spec string, now time.Time) bool {
	at, ok := m.replaceAt(pod, l, t, spec, now)
	return ok && !now.Before(at)
}

// observe records, at now, when l was first seen untrusted under t (and
// forgets it once l is trusted again), and for a leaf that ends with its
// CA, when a CA that can renew it was first seen.
func observe(l *leafState, t *trust, now time.Time) {
	switch ok := trusted(*l, t, now); {
	case ok:
		l.untrustedSince = time.Time{}
	case l.untrustedSince.IsZero():
		l.untrustedSince = now
	}
	if l.capped && l.renewableSince.IsZero() {
		if issuer, err := t.state.Issuer(now); err == nil && issuer.NotAfter.After(l.notAfter) {
			l.renewableSince = now
		}
	}
}
