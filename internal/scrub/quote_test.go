// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package scrub

import (
	"runtime"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	r := New()
	const secret = `lit-Z8k2/P+qw &<Y0>=Mé9xQ`
	r.AddString("pw", secret)
	long := strings.Repeat("a", 300)
	for _, tc := range []struct {
		name, input, part, want string
	}{
		{"plain input", "hello:v1", "hello:v1", `"hello:v1"`},
		{"the whole value is labelled", secret, secret, `"<secret pw>"`},
		{"the value inside other text is labelled", "x=" + secret, "x=" + secret, `"x=<secret pw>"`},
		{"a prefix", secret[:19], secret[:19], Withheld},
		{"a component", "lit-Z8k2", "lit-Z8k2", Withheld},
		{"four bytes of the middle", "xx+qw &yy", "xx+qw &yy", Withheld},
		{"three bytes are not a fragment", "qw x", "qw x", `"qw x"`},
		{"a component of the whole value", secret, "lit-Z8k2", Withheld},
		{"one character of a prefix", secret[:10], "Z", Withheld},
		{"one character of an unrelated input", "Bad_Group", "_", `"_"`},
		{"a long input is cut", long, long, `"` + strings.Repeat("a", QuoteLimit) + `"… (300 bytes)`},
		{"a cut keeps characters whole", strings.Repeat("é", 150), strings.Repeat("é", 150), `"` + strings.Repeat("é", QuoteLimit/2) + `"… (300 bytes)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QuotePart(tc.input, tc.part); got != tc.want {
				t.Errorf("QuotePart(%q, %q) = %s, want %s", tc.input, tc.part, got, tc.want)
			}
		})
	}
	if got := Quote(secret[4:12]); got != Withheld {
		t.Errorf("Quote of an inner piece = %s", got)
	}
	runtime.KeepAlive(r)
}

// TestQuoteSeesEveryRegistry checks that a value registered in any live
// registry, not only the process's, is withheld, and that a registry the
// program dropped no longer counts.
func TestQuoteSeesEveryRegistry(t *testing.T) {
	a, b := New(), New()
	a.AddString("a", "first-value-aaaa")
	b.AddString("b", "second-value-bbbb")
	for _, in := range []string{"first-v", "value-bbb"} {
		if got := Quote(in); got != Withheld {
			t.Errorf("Quote(%q) = %s, want it withheld", in, got)
		}
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	func() {
		c := New()
		c.AddString("c", "dropped-secret-cccc")
	}()
	for i := 0; i < 5 && Quote("ret-cccc") == Withheld; i++ {
		runtime.GC()
	}
	if got := Quote("ret-cccc"); got != `"ret-cccc"` {
		t.Errorf("a collected registry still withholds input: %s", got)
	}
}

func TestQuoteSpans(t *testing.T) {
	r := New()
	r.AddString("pw", "S3cr/t+Vx9Q7 &<LEAK>=Mé")
	for in, want := range map[string]string{
		`yaml: line 1: did not find expected ','`:                   `yaml: line 1: did not find expected (a character not shown)`,
		"invalid character 'S' looking for beginning of value":      "invalid character (a character not shown) looking for beginning of value",
		`invalid argument "S3cr/t+Vx9" for "--timeout" flag`:        `invalid argument ` + Withheld + ` for "--timeout" flag`,
		"cannot unmarshal !!str `S3cr/t+Vx9Q7 &<LEAK>=Mé` into int": "cannot unmarshal !!str \"<secret pw>\" into int",
		`key "` + strings.Repeat("k", 300) + `" already set in map`: `key "` + strings.Repeat("k", QuoteLimit) + `"… (300 bytes) already set in map`,
		`plain message without quotes`:                              `plain message without quotes`,
	} {
		if got := QuoteSpans(in); got != want {
			t.Errorf("QuoteSpans(%q)\n got %q\nwant %q", in, got, want)
		}
	}
	runtime.KeepAlive(r)
}
