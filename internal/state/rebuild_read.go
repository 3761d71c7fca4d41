// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
)

// chooseService picks the Service payload of identity id for deployment k:
// the picked one, or the only one listed, verified.
func chooseService(ctx context.Context, store objstore.Store, cache PayloadCache, l *Listing, id ServiceID, picks map[ServiceID]Pick, used map[string]bool, k Key) (string, *Ambiguity) {
	prefix := ServicesPrefix + id.Namespace + "/" + id.Name + "/sha512/"
	var cands []Candidate
	for _, p := range l.Keys(prefix) {
		_, d, err := ParseServicePath(p)
		if err != nil {
			continue
		}
		cands = append(cands, Candidate{Path: p, Digest: d, Written: l.objects[p].LastModified})
	}
	slices.SortFunc(cands, func(a, b Candidate) int { return b.Written.Compare(a.Written) })
	subject := "service:" + id.String()
	pick, picked := picks[id]
	if picked {
		used[pick.String()] = true
		var matches []Candidate
		for _, c := range cands {
			if strings.HasPrefix(c.Digest, pick.Digest) {
				matches = append(matches, c)
			}
		}
		if len(matches) != 1 {
			return "", &Ambiguity{Subject: subject, Reason: fmt.Sprintf("--pick %s matches %d of its %d payloads", pick, len(matches), len(cands)), Candidates: cands}
		}
		cands = matches
	}
	switch len(cands) {
	case 0:
		return "", &Ambiguity{Subject: k.String(), Reason: fmt.Sprintf("its Pod names Service %s, which has no payload in the bucket; leave the deployment out", id), LeaveOut: []Key{k}}
	case 1:
	default:
		return "", &Ambiguity{Subject: subject, Reason: fmt.Sprintf("%d Service payloads (for %s)", len(cands), k), Candidates: cands}
	}
	if err := VerifyListed(ctx, store, cache, l, cands[0].Path); err != nil {
		return "", &Ambiguity{Subject: k.String(), Reason: fmt.Sprintf("the only payload of Service %s is unusable (%v); leave the deployment out", id, err), LeaveOut: []Key{k}}
	}
	return cands[0].Path, nil
}

// checkReadable says why a readable entry of the corrupt index cannot be
// kept, or "" when its payloads are present and intact.
func checkReadable(ctx context.Context, store objstore.Store, cache PayloadCache, l *Listing, pods map[string]podCandidate, k Key, e Entry) string {
	c, ok := pods[e.Pod]
	if !ok {
		if _, listed := l.objects[e.Pod]; listed {
			return fmt.Sprintf("its Pod payload %s is corrupt", e.Pod)
		}
		return fmt.Sprintf("its Pod payload %s is missing from the bucket", e.Pod)
	}
	if c.key != k {
		return fmt.Sprintf("its Pod payload %s is Pod %s", e.Pod, c.key.Name)
	}
	if e.Service != "" {
		if err := VerifyListed(ctx, store, cache, l, e.Service); err != nil {
			return err.Error()
		}
	}
	return ""
}

func candidatesOf(cs []podCandidate) []Candidate {
	out := make([]Candidate, len(cs))
	for i, c := range cs {
		out[i] = c.Candidate
	}
	return out
}

func sortedKeys(m map[Key]bool) []Key {
	out := make([]Key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// readPodCandidates reads and verifies every listed Pod payload, at most
// 16 at once, and returns what each says; objects that are not verified
// Pod payloads are returned as skipped, with the reason.
func readPodCandidates(ctx context.Context, store objstore.Store, cache PayloadCache, l *Listing) ([]podCandidate, []string) {
	paths := l.Keys(NodeGroupsPrefix)
	out := make([]*podCandidate, len(paths))
	reasons := make([]string, len(paths))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, p := range paths {
		ng, digest, err := ParsePodPath(p)
		if err != nil {
			reasons[i] = fmt.Sprintf("%s: not a Pod payload path", p)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			data, err := ReadListed(ctx, store, cache, l, p)
			if err != nil {
				reasons[i] = fmt.Sprintf("%s: %v", p, err)
				return
			}
			meta, err := podMeta(data)
			if err != nil {
				reasons[i] = fmt.Sprintf("%s: %v", p, err)
				return
			}
			k, err := NewKey(ng, meta.name)
			if err != nil {
				reasons[i] = fmt.Sprintf("%s: %v", p, err)
				return
			}
			out[i] = &podCandidate{
				Candidate: Candidate{Path: p, Digest: digest, Written: l.objects[p].LastModified, Images: meta.images},
				key:       k, namespace: meta.namespace, service: meta.service,
			}
		}()
	}
	wg.Wait()
	var cands []podCandidate
	var skipped []string
	for i := range paths {
		switch {
		case out[i] != nil:
			cands = append(cands, *out[i])
		case reasons[i] != "":
			skipped = append(skipped, reasons[i])
		}
	}
	return cands, skipped
}

// podInfo is what a rebuild needs from a Pod payload.
type podInfo struct {
	name, namespace, service string
	images                   []string
}

// podMeta reads a Pod payload's name, namespace (default when omitted),
// Service annotation and container images.
func podMeta(data []byte) (podInfo, error) {
	var pod struct {
		Metadata struct {
			Name        string            `json:"name"`
			Namespace   string            `json:"namespace"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Containers []struct {
				Image string `json:"image"`
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return podInfo{}, fmt.Errorf("decode Pod payload: %w", err)
	}
	info := podInfo{name: pod.Metadata.Name, namespace: pod.Metadata.Namespace, service: pod.Metadata.Annotations[manifest.ServiceAnnotation]}
	if info.namespace == "" {
		info.namespace = "default"
	}
	for _, c := range pod.Spec.Containers {
		info.images = append(info.images, c.Image)
	}
	return info, nil
}

// entryPattern finds "<key>": {<fields>} pairs in an index that may not
// parse as a whole. Keys and paths are validated to a character set
// without quotes, braces or backslashes, so a readable entry matches
// exactly.
// An entry's object holds at most one level of nested objects: the
// revisions it records.
var entryPattern = regexp.MustCompile(`"([^"\\{}\n]{1,400})"\s*:\s*(\{(?:[^{}]|\{[^{}]*\})*\})`)

// salvageEntries returns the entries of a corrupt index that can still be
// read one by one, each decoded and validated as strictly as DecodeIndex
// does, and the ones that cannot (a key that appears twice with different
// entries is dropped in both places, as it proves nothing).
//
// The revisions a readable entry records come back too, when they are
// valid: they are history, not evidence of what is desired, and a rebuilt
// entry keeps them so that history and rollback survive the repair.
func salvageEntries(data []byte) (map[Key]*Entry, map[Key][]Revision, []DroppedEntry) {
	out := map[Key]*Entry{}
	revisions := map[Key][]Revision{}
	var dropped []DroppedEntry
	conflicting := map[Key]bool{}
	for _, m := range entryPattern.FindAllSubmatch(data, -1) {
		raw := string(m[1])
		k, err := ParseKey(raw)
		if err != nil {
			if strings.Contains(raw, "/") {
				dropped = append(dropped, DroppedEntry{Deployment: raw, Reason: err.Error()})
			}
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(m[2]))
		e, rawRevs, err := decodeEntry(dec, raw)
		if err == nil {
			err = e.Validate(k)
		}
		if err == nil && rawRevs != nil {
			if revs, rerr := decodeRevisions(k, rawRevs); rerr == nil {
				revisions[k] = revs
			}
		}
		if err != nil {
			dropped = append(dropped, DroppedEntry{Deployment: raw, Reason: err.Error()})
			continue
		}
		if prev, ok := out[k]; ok && *prev != e {
			conflicting[k] = true
		}
		out[k] = &e
	}
	for k := range conflicting {
		delete(out, k)
		delete(revisions, k)
		dropped = append(dropped, DroppedEntry{Deployment: k.String(), Reason: "appears more than once with different entries"})
	}
	slices.SortFunc(dropped, func(a, b DroppedEntry) int { return strings.Compare(a.Deployment, b.Deployment) })
	return out, revisions, dropped
}
