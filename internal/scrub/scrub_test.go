// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package scrub

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

const value = `s3cr3t-"value"<&>/+?=`

// TestEncodingsScrubbed writes the value in each encoding Podmin's output
// could carry it in, embedded in other text, and checks none survives.
func TestEncodingsScrubbed(t *testing.T) {
	r := New()
	r.AddString("db-password", value)
	j, _ := json.Marshal(value)
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"v": value})
	forms := map[string]string{
		"raw":       "before " + value + " after",
		"json":      `{"v":` + string(j) + `}`,
		"json-html": noHTML.String(),
		"go %q":     fmt.Sprintf("got %q here", value),
		"go %+q":    fmt.Sprintf("got %+q here", value),
		"hex":       "0x" + hex.EncodeToString([]byte(value)),
		"HEX":       strings.ToUpper(hex.EncodeToString([]byte(value))),
		"query":     "?p=" + url.QueryEscape(value),
		"path":      "/x/" + url.PathEscape(value),
	}
	for lead := 0; lead < 3; lead++ {
		for tail := 0; tail < 3; tail++ {
			data := strings.Repeat("L", lead) + value + strings.Repeat("T", tail)
			forms[fmt.Sprintf("base64 %d/%d", lead, tail)] = base64.StdEncoding.EncodeToString([]byte(data))
			forms[fmt.Sprintf("base64url %d/%d", lead, tail)] = base64.URLEncoding.EncodeToString([]byte(data))
		}
	}
	for name, text := range forms {
		got := r.String(text)
		if !strings.Contains(got, "<secret db-password>") {
			t.Errorf("%s: %q not replaced: %q", name, text, got)
		}
		if r.Contains(got) {
			t.Errorf("%s: scrubbed text still holds an encoding: %q", name, got)
		}
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("%s: value survives: %q", name, got)
		}
	}
}

func TestTrimmedAndLines(t *testing.T) {
	r := New()
	r.AddString("key", "-----BEGIN-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END-----\n")
	got := r.String("line: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n")
	if got != "line: <secret key>\n" {
		t.Errorf("a line of a multi-line value: %q", got)
	}
	r.AddString("token", "tok-123456\n")
	if got := r.String(`token="tok-123456"`); got != `token="<secret token>"` {
		t.Errorf("a file value without its newline: %q", got)
	}
}

func TestMinLen(t *testing.T) {
	r := New()
	r.AddString("pin", "12345")
	if r.Len() != 0 || r.String("12345") != "12345" {
		t.Errorf("a %d-byte value is below MinLen %d and must not be scrubbed", 5, MinLen)
	}
	r.AddString("pin", "123456")
	if r.String("pin 123456") != "pin <secret pin>" {
		t.Errorf("a MinLen value must be scrubbed: %q", r.String("pin 123456"))
	}
}

func TestLongestFirst(t *testing.T) {
	r := New()
	r.AddString("short", "abcdef")
	r.AddString("long", "abcdefghij")
	if got := r.String("abcdefghij abcdef"); got != "<secret long> <secret short>" {
		t.Errorf("got %q", got)
	}
}

func TestNilRegistry(t *testing.T) {
	var r *Registry
	r.AddString("k", "whatever-value")
	if r.String("whatever-value") != "whatever-value" || r.Contains("x") || r.Error(nil) != nil {
		t.Error("a nil registry scrubs nothing")
	}
}

func TestError(t *testing.T) {
	r := New()
	sentinel := errors.New("boom")
	err := r.Error(fmt.Errorf("%w: value hunter2hunter2", sentinel))
	r.AddString("pw", "hunter2hunter2") // registered after the error was made
	if err.Error() != "boom: value <secret pw>" {
		t.Errorf("error text %q", err.Error())
	}
	if !errors.Is(err, sentinel) {
		t.Error("errors.Is must see through the wrapper")
	}
	outer := fmt.Errorf("outer %s: %w", "hunter2hunter2", err)
	if r.Error(outer).Error() != "outer <secret pw>: boom: value <secret pw>" {
		t.Errorf("outer text %q", r.Error(outer).Error())
	}
}

// TestWriterSplitValue writes a value one byte at a time and in chunks
// that cut it anywhere: it never reaches the output.
func TestWriterSplitValue(t *testing.T) {
	r := New()
	r.AddString("k", "correct-horse-battery")
	text := "start correct-horse-battery middle correct-horse-battery end\n"
	for chunk := 1; chunk <= len(text); chunk++ {
		var out bytes.Buffer
		w := NewWriter(r, &out)
		for i := 0; i < len(text); i += chunk {
			n, err := w.Write([]byte(text[i:min(i+chunk, len(text))]))
			if err != nil || n != min(chunk, len(text)-i) {
				t.Fatalf("write: %d %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != "start <secret k> middle <secret k> end\n" {
			t.Fatalf("chunk %d: %q", chunk, out.String())
		}
	}
}

func TestWriterHoldsBackOnlyPrefixes(t *testing.T) {
	r := New()
	r.AddString("k", "correct-horse-battery")
	var out bytes.Buffer
	w := NewWriter(r, &out)
	fmt.Fprint(w, ">>> ")
	if out.String() != ">>> " {
		t.Errorf("a prompt must not be delayed: %q", out.String())
	}
	fmt.Fprint(w, "x corr")
	if out.String() != ">>> x " {
		t.Errorf("a possible value prefix is held back: %q", out.String())
	}
	fmt.Fprint(w, "al\n")
	if out.String() != ">>> x corral\n" {
		t.Errorf("released on the next write: %q", out.String())
	}
}

func BenchmarkString(b *testing.B) {
	r := New()
	for i := 0; i < 50; i++ {
		r.AddString(fmt.Sprint("k", i), fmt.Sprintf("secret-value-%04d-xyz", i))
	}
	line := strings.Repeat("an ordinary line of output with no secret in it ", 4) + "\n"
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		_ = r.String(line)
	}
}

// FuzzString checks the scrubber's promise: once a value is registered, no
// text that embeds it comes out holding it, wherever it sits.
func FuzzString(f *testing.F) {
	f.Add("before ", "hunter2-value", " after")
	f.Add("aaaaa", "aaaaaa", "a")
	f.Add("", "abcabc", "abc")
	f.Add("x\n", "line1-value\nline2-value", "\n")
	f.Fuzz(func(t *testing.T, x, v, y string) {
		if len(v) < MinLen || strings.Contains(v, "<") || strings.Contains(v, ">") {
			return // the replacement text itself could complete it
		}
		r := New()
		r.AddString("k", v)
		if got := r.String(x + v + y); strings.Contains(got, v) {
			t.Fatalf("String(%q + %q + %q) = %q still holds the value", x, v, y, got)
		}
		var out bytes.Buffer
		w := NewWriter(r, &out)
		text := x + v + y
		for i := 0; i < len(text); i += 3 {
			_, _ = w.Write([]byte(text[i:min(i+3, len(text))]))
		}
		_ = w.Flush()
		if strings.Contains(out.String(), v) {
			t.Fatalf("Writer passed %q through in 3-byte writes: %q", v, out.String())
		}
	})
}

// BenchmarkWriterLargeValue writes ordinary lines through a Writer whose
// registry holds a 64 KiB value (the largest any provider stores): the
// hold-back check stays linear in the line, not the value.
func BenchmarkWriterLargeValue(b *testing.B) {
	r := New()
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	r.Add("big", big)
	w := NewWriter(r, io.Discard)
	line := []byte("an ordinary line of output, nothing secret in it\n")
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		_, _ = w.Write(line)
	}
}

// TestTrimmedFormEncodings: a value read from a file or a terminal often
// carries white space around it ("token\n", "  token  ") that its uses
// do not: every encoding the scrubber catches for the value, it catches
// for the value without that white space too, wherever it stands in a
// longer text (base64 at each alignment).
func TestTrimmedFormEncodings(t *testing.T) {
	for _, raw := range []string{
		"  correct horse/battery+staple?&<x>\"é\t\n",
		"\tsecret-with-no-newline = a+b/c?d&e  ",
	} {
		trimmed := strings.TrimSpace(raw)
		r := New()
		r.AddString("k", raw)
		forms := map[string]string{
			"as it is":         trimmed,
			"JSON":             jsonInner(t, trimmed, true),
			"JSON, no escapes": jsonInner(t, trimmed, false),
			"Go-quoted":        strings.Trim(strconv.Quote(trimmed), `"`),
			"Go-quoted ASCII":  strings.Trim(strconv.QuoteToASCII(trimmed), `"`),
			"hex":              hex.EncodeToString([]byte(trimmed)),
			"HEX":              strings.ToUpper(hex.EncodeToString([]byte(trimmed))),
			"query-escaped":    url.QueryEscape(trimmed),
			"path-escaped":     url.PathEscape(trimmed),
		}
		for lead := range 3 {
			framed := []byte(strings.Repeat("~", lead) + trimmed + "~~~")
			forms[fmt.Sprintf("base64 at offset %d", lead)] = base64.StdEncoding.EncodeToString(framed)
			forms[fmt.Sprintf("base64url at offset %d", lead)] = base64.URLEncoding.EncodeToString(framed)
			forms[fmt.Sprintf("raw base64 at offset %d", lead)] = base64.RawStdEncoding.EncodeToString(framed)
		}
		for name, form := range forms {
			text := "before " + form + " after"
			got := r.String(text)
			if got == text || r.Contains(got) {
				t.Errorf("%q, trimmed, %s: not scrubbed: %q", raw, name, got)
			}
		}
	}
}

func jsonInner(t *testing.T, s string, escapeHTML bool) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.Trim(strings.TrimSpace(b.String()), `"`)
}
