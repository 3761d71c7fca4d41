// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"cmp"
	"strconv"
	"strings"
)

// CompareDebian orders two Debian package versions as dpkg does:
// [epoch:]upstream[-revision], the epoch numerically, then the upstream
// version and the revision alternately by non-digit runs (a tilde before
// anything, even the end; letters before other characters) and by digit
// runs compared as numbers. So 17.6-10 follows 17.6-9 and 1.0~rc1 precedes
// 1.0. It orders any version string (release tags, build names) the same
// natural way.
func CompareDebian(a, b string) int {
	ea, ua, ra := splitDebian(a)
	eb, ub, rb := splitDebian(b)
	if c := cmp.Compare(ea, eb); c != 0 {
		return c
	}
	if c := compareVersionPart(ua, ub); c != 0 {
		return c
	}
	return compareVersionPart(ra, rb)
}

// splitDebian splits [epoch:]upstream[-revision]. A malformed epoch is
// part of the upstream version.
func splitDebian(v string) (epoch int, upstream, revision string) {
	if e, rest, ok := strings.Cut(v, ":"); ok {
		if n, err := strconv.Atoi(e); err == nil && n >= 0 {
			epoch, v = n, rest
		}
	}
	if i := strings.LastIndex(v, "-"); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

// compareVersionPart is dpkg's verrevcmp.
func compareVersionPart(a, b string) int {
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	for a != "" || b != "" {
		for a != "" && !isDigit(a[0]) || b != "" && !isDigit(b[0]) {
			ac, bc := charOrder(a), charOrder(b)
			if ac != bc {
				return cmp.Compare(ac, bc)
			}
			a, b = a[1:], b[1:]
		}
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		i := 0
		for i < len(a) && isDigit(a[i]) {
			i++
		}
		j := 0
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		// More significant digits are the greater number; equal lengths
		// compare digit by digit.
		if i != j {
			return cmp.Compare(i, j)
		}
		if c := strings.Compare(a[:i], b[:j]); c != 0 {
			return c
		}
		a, b = a[i:], b[j:]
	}
	return 0
}

// charOrder is dpkg's order of the first character of s: the end and
// digits 0, a tilde below that, letters by code, others above letters.
func charOrder(s string) int {
	if s == "" {
		return 0
	}
	c := s[0]
	switch {
	case c >= '0' && c <= '9':
		return 0
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return int(c)
	case c == '~':
		return -1
	}
	return int(c) + 256
}
