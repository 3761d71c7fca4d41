// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"podmin.dev/podmin/builtins"
)

// terminalKey carries, in the command's context, how standard output
// reaches a terminal: status --watch redraws there and prints plain lines
// elsewhere.
type terminalKey struct{}

// terminalOut is a terminal on standard output; width returns its
// current width in columns (0 when unknown).
type terminalOut struct {
	width func() int
}

// withTerminal records in ctx whether raw (the process's standard
// output) is a terminal.
func withTerminal(ctx context.Context, raw io.Writer) context.Context {
	f, ok := raw.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return ctx
	}
	return context.WithValue(ctx, terminalKey{}, &terminalOut{width: func() int {
		w, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return w
	}})
}

// watchLine is one line of a watch frame; key identifies what it shows
// (a deployment, or one node of one) from frame to frame.
type watchLine struct {
	key, text string
}

// watchFrame renders one status read: per deployment a line, then one
// line per node reporting about it.
func watchFrame(res builtins.StatusResult) []watchLine {
	var lines []watchLine
	for _, g := range res.NodeGroups {
		if g.Problem != "" && len(g.Deployments) == 0 {
			lines = append(lines, watchLine{"nodegroup " + g.NodeGroup, fmt.Sprintf("NodeGroup %s: %s", g.NodeGroup, g.Problem)})
		}
		for _, d := range g.Deployments {
			key := d.NodeGroup + "/" + d.Name
			lines = append(lines, watchLine{key, fmt.Sprintf("%s revision %s: %s", key, shortRev(d.Revision), d.Summary)})
			errs := map[string]int{}
			for i, e := range d.Errors {
				errs[e.Node] = i
			}
			for _, n := range d.Nodes {
				rev := "revision " + shortRev(n.Revision)
				if n.Revision == "" {
					rev = "no revision"
				}
				text := fmt.Sprintf("  %s %s: %s, %s", key, n.Node, rev, n.Readiness)
				var notes []string
				if n.Reason != "" {
					notes = append(notes, n.Reason)
				}
				if n.Waiting != "" {
					notes = append(notes, "waiting: "+n.Waiting)
				}
				if n.Restarts > 0 {
					notes = append(notes, fmt.Sprintf("%d restarts", n.Restarts))
				}
				if i, ok := errs[n.Node]; ok && d.Errors[i].Message != n.Reason {
					e := d.Errors[i]
					notes = append(notes, fmt.Sprintf("error (%s): %s", e.Kind, e.Message))
				} else if ok {
					notes = append(notes, "error ("+d.Errors[i].Kind+")")
				}
				if len(notes) > 0 {
					text += " (" + strings.Join(notes, "; ") + ")"
				}
				lines = append(lines, watchLine{key + " " + n.Node, text})
			}
		}
	}
	if len(lines) == 0 {
		lines = append(lines, watchLine{"none", "no deployments committed"})
	}
	return lines
}

// watchPrinter shows successive frames: on a terminal it redraws them in
// place; elsewhere it prints a line only when it differs from what was
// last printed for the same key, so logs grow only with changes.
type watchPrinter struct {
	w    io.Writer
	tty  *terminalOut
	poll time.Duration
	// drawn is the number of lines the terminal shows of the last frame.
	drawn int
	// last is the text last printed per key (plain lines).
	last  map[string]string
	order []string
}

func (p *watchPrinter) show(res builtins.StatusResult) error {
	frame := watchFrame(res)
	var b strings.Builder
	if p.tty != nil {
		if p.drawn > 0 {
			// Up to the first line of the last frame, and clear below.
			fmt.Fprintf(&b, "\x1b[%dF\x1b[J", p.drawn)
		}
		width := p.tty.width()
		head := fmt.Sprintf("status at %s, every %s until every deployment shown is ready (Ctrl-C stops)", res.CheckedAt.Local().Format(time.TimeOnly), p.poll)
		for _, l := range append([]watchLine{{text: head}}, frame...) {
			b.WriteString(clip(l.text, width))
			b.WriteByte('\n')
		}
		p.drawn = len(frame) + 1
		return p.write(b.String())
	}
	if p.last == nil {
		p.last = map[string]string{}
	}
	seen := map[string]bool{}
	for _, l := range frame {
		seen[l.key] = true
		if prev, ok := p.last[l.key]; ok && prev == l.text {
			continue
		}
		if _, ok := p.last[l.key]; !ok {
			p.order = append(p.order, l.key)
		}
		p.last[l.key] = l.text
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	// What is no longer shown changed too (a node that stopped
	// reporting, a deployment deleted): said once.
	kept := p.order[:0]
	for _, k := range p.order {
		if seen[k] {
			kept = append(kept, k)
			continue
		}
		fmt.Fprintf(&b, "%s: no longer reported\n", strings.TrimSpace(k))
		delete(p.last, k)
	}
	p.order = kept
	return p.write(b.String())
}

// write writes s and pushes it through the scrubbing writer at once: a
// frame must not wait for the bytes of the next.
func (p *watchPrinter) write(s string) error {
	if s == "" {
		return nil
	}
	if _, err := io.WriteString(p.w, s); err != nil {
		return err
	}
	if f, ok := p.w.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// clip cuts s to width columns (runes), so no line wraps and the redraw
// moves up exactly the lines it drew.
func clip(s string, width int) string {
	if width <= 1 {
		return s
	}
	r := []rune(s)
	if len(r) < width {
		return s
	}
	return string(r[:width-2]) + "…"
}

// watchPoll is how often status --watch reads: what --wait reads too.
const watchPoll = time.Second

// watchStatus runs status --watch: it shows every read until every
// deployment shown is ready (exit 0) or the command is interrupted.
func watchStatus(cmd *cobra.Command, env *builtins.Env, opts builtins.StatusOptions) error {
	tty, _ := cmd.Context().Value(terminalKey{}).(*terminalOut)
	wopts := builtins.WatchOptions{StatusOptions: opts, Poll: watchPoll}
	p := &watchPrinter{w: cmd.OutOrStdout(), tty: tty, poll: watchPoll}
	res, err := env.Watch(cmd.Context(), wopts, p.show)
	if err != nil {
		return err
	}
	n := 0
	for _, g := range res.NodeGroups {
		n += len(g.Deployments)
	}
	if n == 0 {
		return nil
	}
	return p.write(fmt.Sprintf("all %d deployment(s) shown are ready\n", n))
}
