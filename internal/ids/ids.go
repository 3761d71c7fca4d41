// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package ids

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"podmin.dev/podmin/internal/scrub"
)

// MaxLen is the longest cluster or NodeGroup ID.
const MaxLen = 32

// reserved names are rejected even though some are syntactically valid: they
// name Podmin's own system paths or would read ambiguously in commands.
var reserved = map[string]string{
	"_system": "it names Podmin's system secrets",
	"system":  "it is too easily confused with Podmin's _system secrets",
	"podmin":  "it names Podmin itself",
	"all":     "it is reserved for commands that address every NodeGroup",
}

// Reserved lists the reserved names in sorted order, for help texts.
func Reserved() []string {
	names := make([]string, 0, len(reserved))
	for n := range reserved {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ValidateCluster checks a cluster ID.
func ValidateCluster(id string) error { return validate("cluster ID", id) }

// ValidateNodeGroup checks a NodeGroup ID.
func ValidateNodeGroup(id string) error { return validate("NodeGroup ID", id) }

func validate(kind, id string) error {
	const rule = "use 1 to 32 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen"
	// The ID may be anything the operator typed (a secret pasted into the
	// wrong field): it is quoted only through the scrubber's quoting.
	q := scrub.Quote(id)
	if why, ok := reserved[id]; ok {
		return fmt.Errorf("invalid %s %s: the name is reserved (%s): choose another name", kind, q, why)
	}
	switch {
	case id == "":
		return fmt.Errorf("invalid %s: it is empty: %s", kind, rule)
	case len(id) > MaxLen:
		return fmt.Errorf("invalid %s %s: %d characters is longer than %d: %s", kind, q, len(id), MaxLen, rule)
	case id[0] < 'a' || id[0] > 'z':
		return fmt.Errorf("invalid %s %s: it must start with a lowercase letter: %s", kind, q, rule)
	case strings.HasSuffix(id, "-"):
		return fmt.Errorf("invalid %s %s: it must not end with a hyphen: %s", kind, q, rule)
	}
	for i, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			ch := scrub.QuoteRune(id, c)
			if ch == scrub.Withheld || c == utf8.RuneError {
				return fmt.Errorf("invalid %s %s: it holds a character that is not allowed: %s", kind, q, rule)
			}
			return fmt.Errorf("invalid %s %s: character %s at position %d is not allowed: %s", kind, q, ch, i+1, rule)
		}
	}
	return nil
}
