// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"encoding/json"
	"fmt"

	yamlv2 "go.yaml.in/yaml/v2"
)

// CanonicalYAML renders a Kubernetes object as the stable bytes that are
// content-addressed: keys sorted, no top-level status, and no null values
// (metav1.ObjectMeta's zero creationTimestamp marshals as null, which would
// otherwise appear in every payload as "creationTimestamp: null").
// Empty objects are kept, since "emptyDir: {}" is meaningful, except for
// the fields in zeroStructKeys.
//
// The YAML is emitted from decoded values rather than with
// sigs.k8s.io/yaml.JSONToYAML, which re-parses JSON as YAML and fails on
// control characters that encoding/json leaves unescaped (found by
// FuzzBuild with an environment value holding DEL).
func CanonicalYAML(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	v, err := decodeJSON(j)
	if err != nil {
		return nil, err
	}
	if m, ok := v.(map[string]any); ok {
		delete(m, "status")
	}
	v, err = yamlValue(v)
	if err != nil {
		return nil, err
	}
	return yamlv2.Marshal(v)
}

// zeroStructKeys name fields that encoding/json always writes, because
// their Go types are structs rather than pointers, and whose empty value
// means the same as an absent one: a container's "resources: {}" and a
// DaemonSet's "updateStrategy: {}" are noise in a generated manifest.
var zeroStructKeys = map[string]bool{"resources": true, "updateStrategy": true}

// yamlValue drops nulls and empty zeroStructKeys, and turns json.Number
// into Go numbers, which the YAML encoder writes unquoted; yaml.v2 sorts
// map keys.
func yamlValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			c, err := yamlValue(e)
			if err != nil {
				return nil, err
			}
			if m, ok := c.(map[string]any); ok && len(m) == 0 && zeroStructKeys[k] {
				delete(v, k)
				continue
			}
			v[k] = c
		}
	case []any:
		for i, e := range v {
			c, err := yamlValue(e)
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
