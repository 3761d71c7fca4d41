// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// What a wait waits for.
const (
	// UntilApplied: every expected node runs the revision's static Pod.
	UntilApplied = "applied"
	// UntilReady: and kubelet reports each of those Pods ready.
	UntilReady = "ready"
)

// DefaultWaitPoll is how often a wait reads the status again: one
// conditional read of the index, the lease and the NodeGroup's status.
const DefaultWaitPoll = time.Second

// StaleErrorGrace is how long an error the nodes reported before a wait
// began may stand unchanged before it ends the wait. A wait for a
// revision that was already committed (status --wait, or a deploy that
// changed nothing) often follows a fix outside the payloads (a secret
// created, an image pushed, a disk freed) that the node has not retried
// yet. A node retries a Pod it kept back at every poll (5 s) and reports
// whatever changes; a retry that fails the same way changes nothing a
// reader can see, so an error still reported unchanged after this long
// is the node's current one.
const StaleErrorGrace = time.Minute

// Errors of a wait that ended before its goal.
var (
	// ErrNodeError: a node reports an error for the revision waited for.
	ErrNodeError = errors.New("a node reports an error for the revision")
	// ErrSuperseded: another commit replaced the revision waited for.
	ErrSuperseded = errors.New("the revision was superseded by a newer commit")
	// ErrReadinessUnknowable: a node has no kubelet Pods API, so waiting
	// for readiness could never end.
	ErrReadinessUnknowable = errors.New("readiness cannot be known")
	// ErrNoNodes: no node has ever reported, and none can: setup never
	// ran (or teardown withdrew it) and no agent ever took part in
	// coordination.
	ErrNoNodes = errors.New("no node has ever reported")
)

// WaitOptions describe a wait for one deployment.
type WaitOptions struct {
	Name, NodeGroup string
	// Until is UntilApplied or UntilReady (the default).
	Until string
	// Revision, when set, is the revision to wait for (deploy --wait):
	// a later commit ends the wait with ErrSuperseded. Empty follows the
	// index: the wait is for whatever revision it names.
	Revision string
	// Timeout ends the wait with a *WaitTimeoutError; zero waits until the
	// context ends (the CLI's --timeout).
	Timeout time.Duration
	// Poll is the interval between reads; zero means DefaultWaitPoll.
	Poll time.Duration
	// newRevision is set by deploy when its commit made Revision the
	// committed one: no node can have reported about it before.
	newRevision bool
}

// WaitResult is the deployment's status when the wait ended.
type WaitResult struct {
	DeploymentStatus
	Until string `json:"until"`
	// WaitedSeconds is how long the wait took.
	WaitedSeconds float64 `json:"waitedSeconds"`
}

// WaitTimeoutError is a wait that ran out of time; it says what was
// still missing. It matches openv.ErrTimeout and context.DeadlineExceeded.
type WaitTimeoutError struct {
	Key    string
	Until  string
	Waited time.Duration
	Last   DeploymentStatus
}

func (e *WaitTimeoutError) Error() string {
	what := "the nodes' status"
	if e.Last.Revision != "" {
		what = "revision " + short(e.Last.Revision)
	}
	return fmt.Sprintf("%v after %s waiting for %s %s to be %s: %s", openv.ErrTimeout, e.Waited.Round(time.Second), e.Key, what, e.Until, e.Last.Summary)
}

// Unwrap makes the error match openv.ErrTimeout and context.DeadlineExceeded.
func (e *WaitTimeoutError) Unwrap() []error {
	return []error{openv.ErrTimeout, context.DeadlineExceeded}
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// checkWait validates the options before anything is read.
func checkWait(opts *WaitOptions) error {
	if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
		return fmt.Errorf("--nodegroup: %w", err)
	}
	if _, err := state.NewKey(opts.NodeGroup, opts.Name); err != nil {
		return err
	}
	switch opts.Until {
	case "":
		opts.Until = UntilReady
	case UntilApplied, UntilReady:
	default:
		return fmt.Errorf("--wait=%s: wait for %s or %s", opts.Until, UntilApplied, UntilReady)
	}
	if opts.Timeout < 0 {
		return fmt.Errorf("timeout %s: use a positive duration", opts.Timeout)
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultWaitPoll
	}
	return nil
}

// Wait waits until every expected node of the deployment's NodeGroup runs
// its committed revision (UntilApplied) and kubelet reports it ready
// (UntilReady). It fails when a node reports an error for that revision
// after it read the commit naming it (ErrNodeError): at once for an error
// reported after the wait began, and for one already reported then only
// when the node reports another error or it still stands StaleErrorGrace
// later. It fails at once when the deployment is not committed when the
// wait begins (ErrNoDeployment), when another commit replaces or deletes
// the revision it waits for (ErrSuperseded), and when readiness is waited for on a node
// without a kubelet (ErrReadinessUnknowable). Out of time it returns a
// *WaitTimeoutError naming what is missing. Progress goes to the Env's
// Progress whenever the summary changes. Each poll costs one conditional
// read of the index, one read of the lease and one conditional read of
// the NodeGroup's status object.
func Wait(ctx context.Context, e *openv.Env, opts WaitOptions) (WaitResult, error) {
	if err := checkWait(&opts); err != nil {
		return WaitResult{}, openv.InvalidArgument(err)
	}
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return WaitResult{}, err
	}
	res, err := wait(ctx, e, store, opts)
	return res, waitError(e, c, err)
}

// waitError explains a bucket error of a wait; its own errors stay as
// they are.
func waitError(e *openv.Env, c contexts.Context, err error) error {
	var te *WaitTimeoutError
	if err == nil || errors.As(err, &te) || errors.Is(err, ErrNodeError) || errors.Is(err, ErrSuperseded) ||
		errors.Is(err, ErrReadinessUnknowable) || errors.Is(err, ErrNoDeployment) || errors.Is(err, ErrNoNodes) {
		return err
	}
	return e.Explain(c, err)
}

func wait(ctx context.Context, e *openv.Env, store objstore.Store, opts WaitOptions) (WaitResult, error) {
	key, _ := state.NewKey(opts.NodeGroup, opts.Name)
	start := e.CurrentTime()
	var deadline time.Time
	if opts.Timeout > 0 {
		deadline = start.Add(opts.Timeout)
	}
	ix := indexReader{store: store}
	sr := statusReader{store: store}
	res := WaitResult{Until: opts.Until}
	res.Name, res.NodeGroup, res.Revision, res.State = key.Name, key.NodeGroup, opts.Revision, StateUnknown
	res.Summary = "nothing read yet"
	timeout := func() (WaitResult, error) {
		waited := e.CurrentTime().Sub(start)
		res.WaitedSeconds = waited.Seconds()
		return res, &WaitTimeoutError{Key: key.String(), Until: opts.Until, Waited: waited, Last: res.DeploymentStatus}
	}
	lastLine := ""
	// earlier holds, per node, the error already reported when the wait
	// began.
	var earlier map[string]NodeError
	for {
		entry, ok, err := ix.entry(ctx, key)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return timeout()
			}
			return res, err
		}
		if !ok {
			if earlier == nil && opts.Revision == "" {
				return res, fmt.Errorf("%w: deployment %s is not in the deployment index: run \"podmin list\" to see deployments", ErrNoDeployment, key)
			}
			// It was committed when the wait began: a delete replaced it.
			return res, fmt.Errorf("%w: deployment %s was deleted from the deployment index while the wait ran", ErrSuperseded, key)
		}
		rev := nodepod.Revision(entry)
		if opts.Revision != "" && rev != opts.Revision {
			return res, fmt.Errorf("%w: %s is now at revision %s, not %s: stop waiting for a revision that will not run", ErrSuperseded, key, short(rev), short(opts.Revision))
		}
		st, err := sr.status(ctx, e.CurrentTime(), []state.Item{{Key: key, Entry: entry}}, "")
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return timeout()
			}
			return res, err
		}
		res.DeploymentStatus = st.NodeGroups[0].Deployments[0]
		if earlier == nil && st.Leader.ID == "" && st.NodeGroups[0].UpdatedAt == nil {
			if err := noNodeCanReport(ctx, store, key); err != nil {
				return res, err
			}
		}
		waited := e.CurrentTime().Sub(start)
		res.WaitedSeconds = waited.Seconds()
		if earlier == nil {
			earlier = map[string]NodeError{}
			if !opts.newRevision {
				earlier = nodeErrors(res.DeploymentStatus)
			}
		}
		decide, held := withoutEarlierErrors(res.DeploymentStatus, earlier, waited >= StaleErrorGrace)
		line := fmt.Sprintf("%s revision %s: %s", key, short(rev), res.Summary)
		if len(held) > 0 {
			line += fmt.Sprintf(" (the error of %s was reported before the wait began: it ends the wait if the node reports another, or still reports it %s after the wait began)", strings.Join(held, ", "), StaleErrorGrace)
		}
		if line != lastLine {
			e.Progressf("%s", line)
			lastLine = line
		}
		if done, err := reached(decide, opts.Until, st.NodeGroups[0]); done || err != nil {
			return res, err
		}
		if !deadline.IsZero() && !e.CurrentTime().Before(deadline) {
			return timeout()
		}
		pause := opts.Poll
		if !deadline.IsZero() {
			pause = min(pause, deadline.Sub(e.CurrentTime()))
		}
		if err := e.Pause(ctx, pause); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return timeout()
			}
			return res, err
		}
	}
}

// noNodeCanReport fails with ErrNoNodes when nothing will ever report on
// key: checked only when no agent has ever held the coordination lease
// and no status of key's NodeGroup exists, it costs one HEAD of the
// cluster configuration. A cluster set up (nodes may still be booting, or
// local agents not started yet) is waited for.
func noNodeCanReport(ctx context.Context, store objstore.Store, key state.Key) error {
	_, err := store.Head(ctx, state.TFVarsPath)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, objstore.ErrNotFound):
		return fmt.Errorf("read %s: %w", state.TFVarsPath, err)
	}
	return fmt.Errorf("%w: the cluster has no published configuration (%s is absent: setup never ran, or teardown withdrew it) and no agent has ever taken part in coordination (%s is absent), so no node can run %s: run \"podmin setup\" (on a local context it prints the podmin-agent command of every node), start the agents, then wait again",
		ErrNoNodes, state.TFVarsPath, state.DNSLeaderPath, key)
}

// nodeErrors maps each node with an error in d to that error.
func nodeErrors(d DeploymentStatus) map[string]NodeError {
	out := map[string]NodeError{}
	for _, e := range d.Errors {
		out[e.Node] = e
	}
	return out
}

// withoutEarlierErrors is d without the errors the wait found when it
// began (earlier) that nodes still report unchanged, unless grace has
// passed: only an error a node reported after the wait began (another
// kind, message or revision) may end it early. held names the nodes
// whose errors were left out.
func withoutEarlierErrors(d DeploymentStatus, earlier map[string]NodeError, grace bool) (DeploymentStatus, []string) {
	if grace || len(earlier) == 0 {
		return d, nil
	}
	var kept []NodeError
	var held []string
	for _, e := range d.Errors {
		if was, ok := earlier[e.Node]; ok && was == e {
			held = append(held, e.Node)
			continue
		}
		kept = append(kept, e)
	}
	d.Errors = kept
	return d, held
}

// reached decides whether a wait is over: done, or failed with why.
func reached(d DeploymentStatus, until string, g NodeGroupStatus) (bool, error) {
	// A NodeGroup without a current status proves nothing; a node whose
	// readiness is unknown (its kubelet down) holds back only a wait for
	// readiness.
	if g.Problem != "" || d.State == StateUnknown && until != UntilApplied {
		return false, nil
	}
	if len(d.Errors) > 0 {
		var msgs []string
		for _, e := range d.Errors {
			msgs = append(msgs, fmt.Sprintf("%s (%s): %s", e.Node, e.Kind, e.Message))
		}
		return true, fmt.Errorf("%w: %s/%s revision %s: %s", ErrNodeError, d.NodeGroup, d.Name, short(d.Revision), strings.Join(msgs, "; "))
	}
	if d.Total == 0 {
		return d.State == StateReady, nil
	}
	if until == UntilReady {
		for _, nd := range d.Nodes {
			if nd.Revision != d.Revision || nd.Readiness != state.Unknown {
				continue
			}
			for _, n := range g.Nodes {
				if n.Node == nd.Node && n.State == state.NodeLive && !n.Kubelet {
					return true, fmt.Errorf("%w on node %s of %s: it follows no kubelet Pods API, so its Pods' readiness is never reported: wait until applied instead", ErrReadinessUnknowable, n.Node, g.NodeGroup)
				}
			}
		}
		return d.State == StateReady, nil
	}
	return d.Applied == d.Total && g.Missing == 0, nil
}

// indexReader reads the deployment index conditionally on its ETag.
type indexReader struct {
	store objstore.Store
	ix    *state.Index
	etag  string
}

func (r *indexReader) entry(ctx context.Context, key state.Key) (state.Entry, bool, error) {
	opts := objstore.GetOptions{}
	if r.ix != nil && r.etag != "" {
		opts.IfNoneMatch = r.etag
	}
	obj, err := r.store.Get(ctx, state.IndexPath, opts)
	switch {
	case errors.Is(err, objstore.ErrNotModified):
	case errors.Is(err, objstore.ErrNotFound):
		// Gone since it was read, or never there in a bucket that holds
		// desired state: lost, and the deployment is unknown, not deleted.
		if r.ix != nil {
			return state.Entry{}, false, &state.IndexMissingError{}
		}
		if err := state.CheckIndexAbsence(ctx, r.store); err != nil {
			return state.Entry{}, false, err
		}
		return state.Entry{}, false, nil
	case err != nil:
		return state.Entry{}, false, fmt.Errorf("read %s: %w", state.IndexPath, err)
	default:
		ix, err := state.DecodeIndex(obj.Data)
		if err != nil {
			return state.Entry{}, false, err
		}
		r.ix, r.etag = ix, obj.ETag
	}
	e, ok := r.ix.Lookup(key)
	return e, ok, nil
}
