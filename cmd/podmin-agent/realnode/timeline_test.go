// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package realnode

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// replacement is how kubelet and containerd replaced a static Pod, read
// from their logs: when kubelet saw the file change (its --v=2 SyncLoop
// line), when containerd had stopped the old Pod's sandbox, when kubelet
// asked for the new one, when containerd had it ready and when the new
// Pod's first container started. A zero time is a step the logs do not
// show.
type replacement struct {
	seen, oldStopped, newRequested, newReady, started time.Time
}

var (
	// containerd's logrus lines: time="…" level=info msg="…".
	containerdLine = regexp.MustCompile(`^time="([^"]+)" level=\w+ msg="((?:[^"\\]|\\.)*)"`)
	// The sandbox metadata is printed in protobuf's text format, quotes
	// escaped: name:\"web-e2e-node\"  uid:\"…\"  namespace:\"default\".
	sandboxReturns = regexp.MustCompile(`^RunPodSandbox for name:\\"([^\\"]+)\\".* returns sandbox id \\"([0-9a-f]+)\\"`)
	sandboxAsked   = regexp.MustCompile(`^RunPodSandbox for name:\\"([^\\"]+)\\"`)
	sandboxStopped = regexp.MustCompile(`^StopPodSandbox for \\"([0-9a-f]+)\\" returns successfully`)
	containerRan   = regexp.MustCompile(`^StartContainer for \\"([0-9a-f]+)\\" returns successfully`)
	// klog's header: severity, MMDD hh:mm:ss.uuuuuu.
	klogLine = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})\s`)
	syncLoop = regexp.MustCompile(`"SyncLoop (?:ADD|REMOVE)" source="file"`)
)

// parseReplacement reads the replacement of static Pod pod (kubelet's
// name, e.g. web-e2e-node) after since. containerd is containerd's whole
// log (the old sandbox's ID comes from before since), kubelet kubelet's.
// kubelet's "seen" is its first SyncLoop ADD or REMOVE
// of pod from the file source.
func parseReplacement(containerd, kubelet, pod string, since time.Time, loc *time.Location) (replacement, error) {
	var r replacement
	ours := map[string]bool{} // sandbox IDs of pod
	var newID string
	for line := range strings.Lines(containerd) {
		m := containerdLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			return r, fmt.Errorf("containerd's log: time %q: %w", m[1], err)
		}
		msg := m[2]
		if s := sandboxReturns.FindStringSubmatch(msg); s != nil {
			if s[1] == pod {
				ours[s[2]] = true
				if !at.Before(since) && newID == "" && !r.newRequested.IsZero() {
					newID, r.newReady = s[2], at
				}
			}
			continue
		}
		if at.Before(since) {
			continue
		}
		if s := sandboxAsked.FindStringSubmatch(msg); s != nil && s[1] == pod && r.newRequested.IsZero() {
			r.newRequested = at
		}
		if s := sandboxStopped.FindStringSubmatch(msg); s != nil && ours[s[1]] && s[1] != newID && r.oldStopped.IsZero() {
			r.oldStopped = at
		}
		if containerRan.MatchString(msg) && newID != "" && r.started.IsZero() {
			r.started = at
		}
	}
	seen, err := kubeletTimes(kubelet, since, loc, func(line string) bool {
		return syncLoop.MatchString(line) && strings.Contains(line, `/`+pod+`"`)
	})
	if len(seen) > 0 {
		r.seen = seen[0]
	}
	return r, err
}

// readinessFailures are the times kubelet's log shows a failed readiness
// probe of static Pod pod at or after since.
func readinessFailures(kubelet, pod string, since time.Time, loc *time.Location) ([]time.Time, error) {
	return kubeletTimes(kubelet, since, loc, func(line string) bool {
		return strings.Contains(line, `"Probe failed" probeType="Readiness"`) && strings.Contains(line, ` pod="default/`+pod+`"`)
	})
}

// kubeletTimes are the times of kubelet's log lines that match, at or
// after since. klog's timestamps carry neither year nor zone: they are
// taken in loc, in since's year.
func kubeletTimes(kubelet string, since time.Time, loc *time.Location, match func(string) bool) ([]time.Time, error) {
	var out []time.Time
	for line := range strings.Lines(kubelet) {
		m := klogLine.FindStringSubmatch(line)
		if m == nil || !match(line) {
			continue
		}
		at, err := time.ParseInLocation("0102 15:04:05.000000", m[1], loc)
		if err != nil {
			return out, fmt.Errorf("kubelet's log: time %q: %w", m[1], err)
		}
		if at = at.AddDate(since.In(loc).Year(), 0, 0); !at.Before(since) {
			out = append(out, at)
		}
	}
	return out, nil
}

// describe lists the steps as offsets from since.
func (r replacement) describe(since time.Time) string {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "not in the logs"
		}
		return "+" + t.Sub(since).Round(10*time.Millisecond).String()
	}
	s := fmt.Sprintf("kubelet saw the file change %s; the old sandbox stopped %s; kubelet asked for the new sandbox %s",
		at(r.seen), at(r.oldStopped), at(r.newRequested))
	if !r.seen.IsZero() && !r.oldStopped.IsZero() && !r.newRequested.IsZero() {
		s += fmt.Sprintf(" (%s after it saw the change, %s after the old one stopped)",
			r.newRequested.Sub(r.seen).Round(10*time.Millisecond), r.newRequested.Sub(r.oldStopped).Round(10*time.Millisecond))
	}
	s += fmt.Sprintf("; the new sandbox was ready %s; its container started %s", at(r.newReady), at(r.started))
	return s
}
