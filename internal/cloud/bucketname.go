// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"fmt"
	"net/netip"
	"strings"

	"podmin.dev/podmin/internal/scrub"
)

// ValidateS3BucketName applies S3's general-purpose bucket naming rules, so a
// bad name fails before any request and a local bucket name would also be
// valid in S3.
func ValidateS3BucketName(name string) error {
	const rule = "use 3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit"
	bad := func(why string) error {
		return fmt.Errorf("invalid bucket name %s: %s: %s", scrub.Quote(name), why, rule)
	}
	if len(name) < 3 || len(name) > 63 {
		return bad(fmt.Sprintf("%d characters", len(name)))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' {
			if ch := scrub.QuoteRune(name, rune(c)); ch != scrub.Withheld && c < 0x80 {
				return bad("character " + ch + " is not allowed")
			}
			return bad("it holds a character that is not allowed")
		}
	}
	alnum := func(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return bad("it must start and end with a letter or digit")
	}
	if strings.Contains(name, "..") {
		return bad("it contains two adjacent dots")
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return bad("it is formatted as an IP address")
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return bad("the prefix " + p + " is reserved by S3")
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", "--x-s3", ".mrap"} {
		if strings.HasSuffix(name, s) {
			return bad("the suffix " + s + " is reserved by S3")
		}
	}
	return nil
}
