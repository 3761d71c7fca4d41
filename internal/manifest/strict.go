// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"podmin.dev/podmin/internal/scrub"
)

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkTypes walks a generic JSON value alongside the Go type it will be
// decoded into and reports, with field paths, every unknown field and every
// value of the wrong JSON type. encoding/json alone would report neither
// the path nor a field whose name differs only in case (it matches names
// case-insensitively), so this walk is the strictness authority and the
// later json.Unmarshal cannot fail on its own.
func checkTypes(p *problems, subject, path string, v any, t reflect.Type) {
	if v == nil {
		return // null is the zero value, as in Kubernetes
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType) {
		raw, err := json.Marshal(v)
		if err == nil {
			err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw)
		}
		if err != nil {
			p.add(subject, path, "invalid value %s: %v", describe(v), err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkTypes(p, subject, path, v, t.Elem())
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			p.add(subject, path, "must be an object, not %s", describe(v))
			return
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				p.add(subject, fieldPath(path, k), "unknown field: check its spelling, case and indentation")
				continue
			}
			checkTypes(p, subject, fieldPath(path, k), m[k], ft)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			p.add(subject, path, "must be an object, not %s", describe(v))
			return
		}
		for _, k := range sortedKeys(m) {
			checkTypes(p, subject, keyPath(path, k), m[k], t.Elem())
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			if _, ok := v.(string); !ok {
				p.add(subject, path, "must be a base64 string, not %s", describe(v))
			}
			return
		}
		l, ok := v.([]any)
		if !ok {
			p.add(subject, path, "must be a list, not %s", describe(v))
			return
		}
		for i, e := range l {
			checkTypes(p, subject, fmt.Sprintf("%s[%d]", path, i), e, t.Elem())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			p.add(subject, path, "must be a string, not %s; quote it", describe(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			p.add(subject, path, "must be true or false, not %s", describe(v))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if ok {
			_, err := strconv.ParseInt(string(n), 10, t.Bits())
			ok = err == nil
		}
		if !ok {
			p.add(subject, path, "must be an integer of at most %d bits, not %s", t.Bits(), describe(v))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if ok {
			_, err := strconv.ParseUint(string(n), 10, t.Bits())
			ok = err == nil
		}
		if !ok {
			p.add(subject, path, "must be a non-negative integer of at most %d bits, not %s", t.Bits(), describe(v))
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if ok {
			_, err := strconv.ParseFloat(string(n), t.Bits())
			ok = err == nil
		}
		if !ok {
			p.add(subject, path, "must be a number, not %s", describe(v))
		}
	case reflect.Interface:
		// Free-form by definition.
	default:
		p.add(subject, path, "cannot be decoded into %s", t)
	}
}

// jsonFields maps the JSON names of t's fields, with inlined embedded
// structs (TypeMeta) flattened as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

// fieldPath appends a struct field name, quoting names a dot path could not
// show unambiguously.
func fieldPath(path, key string) string {
	if !plainKeyRE.MatchString(key) {
		return keyPath(path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// keyPath appends a map key: metadata.annotations["podmin.dev/service"].
func keyPath(path, key string) string {
	return path + "[" + scrub.Quote(key) + "]"
}
