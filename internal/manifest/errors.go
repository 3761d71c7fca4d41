// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	"podmin.dev/podmin/internal/scrub"
)

// ErrInvalid is wrapped by every validation error, so callers can tell a
// manifest or option the user must fix from an internal failure.
var ErrInvalid = errors.New("invalid manifest")

// Error is one validation problem. Extract and Build return several of them
// joined with errors.Join; errors.As finds the first.
type Error struct {
	// Subject is what the problem is in: "DaemonSet", "Service",
	// "document 2" for stream structure, or an option value such as
	// `image "web=hello:v1"`. Empty for problems of the whole stream.
	Subject string
	// Field is the field path inside Subject, for example
	// "spec.template.spec.affinity". Empty when the whole subject is wrong.
	Field string
	// Detail says what is wrong and what to do about it.
	Detail string
}

// Error renders "<subject> <field>: <detail>", omitting empty parts.
func (e *Error) Error() string {
	head := e.Subject
	if e.Field != "" {
		if head != "" {
			head += " "
		}
		head += e.Field
	}
	if head == "" {
		return e.Detail
	}
	return head + ": " + e.Detail
}

// Unwrap lets errors.Is(err, ErrInvalid) match every validation problem.
func (e *Error) Unwrap() error { return ErrInvalid }

// problems collects validation errors in a deterministic order.
type problems struct {
	errs []error
}

func (p *problems) add(subject, field, format string, args ...any) {
	p.errs = append(p.errs, &Error{Subject: subject, Field: field, Detail: fmt.Sprintf(format, args...)})
}

func (p *problems) ok() bool { return len(p.errs) == 0 }

func (p *problems) err() error { return errors.Join(p.errs...) }

const (
	subjectDaemonSet = "DaemonSet"
	subjectService   = "Service"
)

// labelHint explains the DNS-1123 label rule in every message that uses it.
const labelHint = "use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit"

// dnsLabel reports why s is not a DNS-1123 label, or "" when it is one.
// what names the value, e.g. "namespace".
func dnsLabel(what, s string) string {
	if s == "" {
		return what + " is required"
	}
	if len(validation.IsDNS1123Label(s)) > 0 {
		return fmt.Sprintf("%s is not a valid %s: %s", scrub.Quote(s), what, labelHint)
	}
	return ""
}

// ReservedNamespace is the namespace Podmin keeps for its own system
// secrets (/<cluster>/_system/...); it can never hold a workload.
const ReservedNamespace = "_system"

// DefaultNamespace is used when a manifest or option omits the namespace.
const DefaultNamespace = "default"

// namespaceProblem reports why ns cannot hold a deployment, or "".
func namespaceProblem(ns string) string {
	if ns == ReservedNamespace {
		return fmt.Sprintf("%s is reserved for Podmin system state; choose another namespace", scrub.Quote(ns))
	}
	return dnsLabel("namespace", ns)
}
