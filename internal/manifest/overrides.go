// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/internal/scrub"
)

// imageValue is one parsed image option: "<reference>" (bare, container
// empty) or "<container>=<reference>". ref is already resolved.
type imageValue struct {
	raw       string
	container string
	ref       string
}

func imageSubject(raw string) string { return "image " + scrub.Quote(raw) }

// CheckImageValues applies to image option values ("<reference>" or
// "<container>=<reference>") the rules that need no manifest: syntax,
// resolvable references, duplicates, one bare value, no mixing.
func CheckImageValues(raws []string) error {
	var p problems
	parseImageValues(&p, raws)
	return p.err()
}

// parseImageValues applies the rules that need no template: syntax,
// duplicates, at most one bare value, and no mixing of bare and named.
func parseImageValues(p *problems, raws []string) []imageValue {
	var out []imageValue
	seen := map[string]bool{}
	bare, named := 0, 0
	for _, raw := range raws {
		subject := imageSubject(raw)
		name, ref, isNamed := strings.Cut(raw, "=")
		if !isNamed {
			name, ref = "", raw
		}
		if ref == "" {
			p.add(subject, "", "the reference is empty: use <reference> or <container>=<reference>")
			continue
		}
		if isNamed {
			if name == "" {
				p.add(subject, "", "the container name is empty: use <container>=<reference>")
				continue
			}
			if problem := dnsLabel("container name", name); problem != "" {
				p.add(subject, "", "%s", problem)
				continue
			}
			if seen[name] {
				p.add(subject, "", "container %s is named twice; give each container one image", scrub.QuotePart(raw, name))
				continue
			}
			seen[name] = true
			named++
		} else {
			bare++
			if bare > 1 {
				p.add(subject, "", "only one bare image is allowed; name each image as <container>=<reference>")
				continue
			}
		}
		resolved, err := ResolveImage(ref)
		if err != nil {
			p.add(subject, "", "%v", err)
			continue
		}
		out = append(out, imageValue{raw: raw, container: name, ref: resolved})
	}
	if bare > 0 && named > 0 {
		for _, v := range raws {
			if !strings.Contains(v, "=") {
				p.add(imageSubject(v), "", "bare and named images cannot be combined; name every image as <container>=<reference>")
				break
			}
		}
	}
	return out
}

// applyImages sets the images of spec's containers and init containers.
// It runs after parseImageValues succeeded and container names are unique.
func applyImages(p *problems, spec *corev1.PodSpec, values []imageValue) {
	byName := map[string]*corev1.Container{}
	var names []string
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		byName[c.Name] = c
		names = append(names, c.Name)
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		byName[c.Name] = c
		names = append(names, c.Name)
	}
	for _, v := range values {
		if v.container == "" {
			if len(names) != 1 {
				p.add(imageSubject(v.raw), "", "a bare image needs a template with exactly one container, but it has %d; name the container as <container>=<reference>", len(names))
				continue
			}
			byName[names[0]].Image = v.ref
			continue
		}
		c, ok := byName[v.container]
		if !ok {
			p.add(imageSubject(v.raw), "", "no container or init container is named %s; use one of: %s", scrub.QuotePart(v.raw, v.container), strings.Join(names, ", "))
			continue
		}
		c.Image = v.ref
	}
}
