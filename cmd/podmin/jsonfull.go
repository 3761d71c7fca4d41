// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"podmin.dev/podmin/builtins/infra"
)

// marshalFull encodes v as indented JSON with every field present: the
// documented output schema promises that a script never has to guard a
// field. omitempty is ignored, a nil list is [], a nil map is {}, and a
// nil pointer or interface is null. Field names and order are those of
// the json tags, as with encoding/json.
func marshalFull(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeFull(&buf, reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// stringOutputs are the types an output document shows as the string the
// operator typed: setup's --workload-ca-publish s3://BUCKET/KEY is kept as
// {bucket, key} in the published configuration, and shown as the flag's
// value here, "" when unset, like every unset string.
var stringOutputs = map[reflect.Type]bool{reflect.TypeFor[*infra.S3Object](): true}

func encodeFull(buf *bytes.Buffer, v reflect.Value) error {
	if !v.IsValid() {
		buf.WriteString("null")
		return nil
	}
	t := v.Type()
	if stringOutputs[t] {
		s := ""
		if !v.IsNil() {
			s = v.Interface().(fmt.Stringer).String()
		}
		b, err := json.Marshal(s)
		buf.Write(b)
		return err
	}
	// Types that define their own encoding keep it (times, quantities).
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) {
		if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
			if !t.Implements(jsonMarshaler) {
				// A value written as text is a string: unset, it is "".
				buf.WriteString(`""`)
				return nil
			}
			buf.WriteString("null")
			return nil
		}
		return encodeLeaf(buf, v)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		return encodeFull(buf, v.Elem())
	case reflect.Struct:
		buf.WriteByte('{')
		first := true
		if err := encodeFields(buf, v, &first); err != nil {
			return err
		}
		buf.WriteByte('}')
		return nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return encodeLeaf(buf, v)
		}
		if v.IsNil() {
			buf.WriteString("[]")
			return nil
		}
		fallthrough
	case reflect.Array:
		buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeFull(buf, v.Index(i)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return encodeLeaf(buf, v)
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeLeaf(buf, reflect.ValueOf(k.String())); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := encodeFull(buf, v.MapIndex(k)); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	}
	return encodeLeaf(buf, v)
}

// encodeFields writes the exported fields of struct v, flattening
// embedded structs without a json name as encoding/json does.
func encodeFields(buf *bytes.Buffer, v reflect.Value, first *bool) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv, ft = fv.Elem(), ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if err := encodeFields(buf, fv, first); err != nil {
					return err
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
		if !*first {
			buf.WriteByte(',')
		}
		*first = false
		if err := encodeLeaf(buf, reflect.ValueOf(name)); err != nil {
			return err
		}
		buf.WriteByte(':')
		// An optional value that is unset (a zero time) is null, not a
		// made-up value such as 0001-01-01T00:00:00Z.
		if (strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")) && isZeroer(fv) {
			buf.WriteString("null")
			continue
		}
		if err := encodeFull(buf, fv); err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
	}
	return nil
}

func encodeLeaf(buf *bytes.Buffer, v reflect.Value) error {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// isZeroer reports whether v is a struct with an IsZero method that says
// it is unset (time.Time).
func isZeroer(v reflect.Value) bool {
	if v.Kind() != reflect.Struct {
		return false
	}
	z, ok := v.Interface().(interface{ IsZero() bool })
	return ok && z.IsZero()
}
