// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package faultstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Op names a Store operation.
type Op string

// The operations of objstore.Store.
const (
	OpGet         Op = "Get"
	OpHead        Op = "Head"
	OpPutIfAbsent Op = "PutIfAbsent"
	OpPutIfMatch  Op = "PutIfMatch"
	OpPut         Op = "Put"
	OpDelete      Op = "Delete"
	OpList        Op = "List"
)

// WriteOps returns the operations that change the store, for Rule.Ops.
func WriteOps() []Op { return []Op{OpPutIfAbsent, OpPutIfMatch, OpPut, OpDelete} }

var (
	// ErrInjected marks an error injected before the call: the inner store
	// never saw the request.
	ErrInjected = errors.New("injected fault")
	// ErrAmbiguous marks an error injected after the call succeeded: the
	// inner store applied the request and only the response was lost. The
	// caller cannot tell this from a failure, which is the point.
	ErrAmbiguous = errors.New("ambiguous result: the response was lost and the request may have been applied")
)

// Action is what a rule does to a call it selects.
type Action int

const (
	// Fail returns an error wrapping ErrInjected (and Rule.Err) without
	// calling the inner store.
	Fail Action = iota + 1
	// Delay waits Rule.Latency (context-aware) before the call.
	Delay
	// Ambiguous makes the call, then returns an error wrapping ErrAmbiguous
	// if the call succeeded. Meant for writes; on reads it is a lost reply.
	Ambiguous
)

// String names the action in test output.
func (a Action) String() string {
	switch a {
	case Fail:
		return "fail"
	case Delay:
		return "delay"
	case Ambiguous:
		return "ambiguous"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Rule selects calls and injects one fault into them. Rules are evaluated
// in order; every selected Delay adds up, and the first selected Fail
// wins over everything after it.
type Rule struct {
	// Action is the fault to inject.
	Action Action
	// Ops selects operations; empty selects all.
	Ops []Op
	// Prefix selects keys (for List, the listed prefix) that start with it.
	Prefix string
	// Probability is the chance that a selected call is faulted, drawn from
	// the store's seeded RNG; 0 and 1 both mean every selected call.
	Probability float64
	// Skip lets the first Skip selected calls through, so "fail the third
	// write" is Skip: 2, Limit: 1.
	Skip int
	// Limit stops the rule after it fired Limit times; 0 means no limit.
	Limit int
	// Err is wrapped, next to ErrInjected, into the errors of a Fail rule
	// (for example objstore.ErrPrecondition to fake a lost race).
	Err error
	// Latency is the wait of a Delay rule.
	Latency time.Duration
}

// ruleState is a rule with its counters.
type ruleState struct {
	Rule
	seen, fired int
}

// selects reports whether the rule applies to op on key, before Skip,
// Limit and Probability.
func (r *ruleState) selects(op Op, key string) bool {
	return (len(r.Ops) == 0 || slices.Contains(r.Ops, op)) && strings.HasPrefix(key, r.Prefix)
}

// Counts holds one number per operation.
type Counts struct {
	Get, Head, PutIfAbsent, PutIfMatch, Put, Delete, List int
}

// Of returns the number for op, zero for an unknown operation.
func (c Counts) Of(op Op) int {
	if f := c.field(op); f != nil {
		return *f
	}
	return 0
}

// Reads is Get + Head + List.
func (c Counts) Reads() int { return c.Get + c.Head + c.List }

// Writes is PutIfAbsent + PutIfMatch + Put + Delete.
func (c Counts) Writes() int { return c.PutIfAbsent + c.PutIfMatch + c.Put + c.Delete }

// Total is the number of all operations.
func (c Counts) Total() int { return c.Reads() + c.Writes() }

func (c *Counts) field(op Op) *int {
	switch op {
	case OpGet:
		return &c.Get
	case OpHead:
		return &c.Head
	case OpPutIfAbsent:
		return &c.PutIfAbsent
	case OpPutIfMatch:
		return &c.PutIfMatch
	case OpPut:
		return &c.Put
	case OpDelete:
		return &c.Delete
	case OpList:
		return &c.List
	}
	return nil
}
