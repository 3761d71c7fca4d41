// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package nodepod

import (
	"bytes"
	"encoding/json"
	"fmt"

	yamlv2 "go.yaml.in/yaml/v2"
	corev1 "k8s.io/api/core/v1"
)

// encode writes the Pod as stable YAML in the payload's own style: sorted
// keys, no status, no nulls (so no "creationTimestamp: null"), empty
// objects kept ("emptyDir: {}" means something). Equal Pods are equal
// bytes, so an unchanged Pod is never rewritten.
func encode(pod *corev1.Pod) ([]byte, error) {
	j, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if m, ok := v.(map[string]any); ok {
		delete(m, "status")
	}
	if v, err = plain(v); err != nil {
		return nil, err
	}
	return yamlv2.Marshal(v)
}

// plain drops nulls and turns json.Number into Go numbers, which the YAML
// encoder writes unquoted.
func plain(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			c, err := plain(e)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
	case []any:
		for i, e := range v {
			c, err := plain(e)
			if err != nil {
				return nil, err
			}
			v[i] = c
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", v, err)
		}
		return f, nil
	}
	return v, nil
}
