// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// baseDaemonSet is the smallest valid DaemonSet; tests mutate a fresh copy.
func baseDaemonSet() map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "DaemonSet",
		"metadata":   map[string]any{"name": "web", "namespace": "product"},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{
					"nodeSelector": map[string]any{"podmin.dev/nodegroup": "workers"},
					"containers": []any{
						map[string]any{"name": "web", "image": "registry.podmin.internal/apps/web:v1"},
					},
				},
			},
		},
	}
}

func baseService() map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": "frontend", "namespace": "product"},
		"spec": map[string]any{
			"selector": map[string]any{"app": "web"},
			"ports":    []any{map[string]any{"port": 443, "targetPort": 8443}},
		},
	}
}

type mutation func(m map[string]any)

// set replaces the value at a dot path; numeric segments index lists.
// Map keys containing dots are set by replacing their parent map.
func set(path string, v any) mutation {
	return func(m map[string]any) { walk(m, path, func(parent any, key string) { put(parent, key, v) }) }
}

// del removes the value at a dot path.
func del(path string) mutation {
	return func(m map[string]any) {
		walk(m, path, func(parent any, key string) { delete(parent.(map[string]any), key) })
	}
}

func walk(m map[string]any, path string, f func(parent any, key string)) {
	segs := strings.Split(path, ".")
	var cur any = m
	for _, s := range segs[:len(segs)-1] {
		if i, err := strconv.Atoi(s); err == nil {
			cur = cur.([]any)[i]
			continue
		}
		next, ok := cur.(map[string]any)[s]
		if !ok {
			next = map[string]any{}
			cur.(map[string]any)[s] = next
		}
		cur = next
	}
	f(cur, segs[len(segs)-1])
}

func put(parent any, key string, v any) {
	if i, err := strconv.Atoi(key); err == nil {
		l := parent.([]any)
		l[i] = v
		return
	}
	parent.(map[string]any)[key] = v
}

func toYAML(m map[string]any) string {
	b, err := yaml.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// stream renders a mutated DaemonSet and, when withService, a Service.
func stream(dsMuts []mutation, svcMuts []mutation, withService bool) []byte {
	ds := baseDaemonSet()
	for _, f := range dsMuts {
		f(ds)
	}
	out := toYAML(ds)
	if withService {
		svc := baseService()
		for _, f := range svcMuts {
			f(svc)
		}
		out += "---\n" + toYAML(svc)
	}
	return []byte(out)
}

func ds(muts ...mutation) []byte { return stream(muts, nil, false) }

func withSvc(muts ...mutation) []byte { return stream(nil, muts, true) }

func container(name, image string) map[string]any {
	c := map[string]any{"name": name}
	if image != "" {
		c["image"] = image
	}
	return c
}
