// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bars

import (
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"podmin.dev/podmin/internal/progress"
)

// Bars draws live bars on a terminal: one per blob or file in flight with
// its bytes, rate and time left, and a total bar below them. Finished
// item bars disappear, so a transfer of many blobs keeps a short screen.
type Bars struct {
	w  io.Writer
	fd int

	mu     sync.Mutex
	active *mpb.Progress // the running transfer's container, if any
}

// New draws on w, which writes to the terminal whose file descriptor
// is fd (used for its width).
func New(w io.Writer, fd int) *Bars { return &Bars{w: w, fd: fd} }

// Log writes one line above the bars of a running transfer, or directly.
func (b *Bars) Log(msg string) {
	b.mu.Lock()
	p := b.active
	b.mu.Unlock()
	if p != nil {
		if _, err := fmt.Fprintln(p, msg); err == nil {
			return
		}
	}
	fmt.Fprintln(b.w, msg)
}

// console is the terminal writer mpb draws through; a terminal that does
// not report its size (a fresh pseudo-terminal) is taken as 80 columns.
type console struct{ *cupwriter.Writer }

func (c console) GetTermSize() (int, int, error) {
	w, h, err := c.Writer.GetTermSize()
	if err != nil || w <= 0 {
		return 80, 24, nil
	}
	return w, h, nil
}

// Begin starts a transfer's bars.
func (b *Bars) Begin(title string, total int64) progress.Transfer {
	cw := cupwriter.New(b.w, true)
	cw.SetTermFd(b.fd)
	p := mpb.New(mpb.WithConsoleWriter(console{cw}), mpb.WithAutoRefresh())
	t := &barTransfer{b: b, p: p, grow: total == 0}
	t.total = p.New(total,
		mpb.BarStyle().Lbound("[").Filler("=").Tip(">").Padding(" ").Rbound("]"),
		mpb.BarPriority(math.MaxInt32),
		mpb.PrependDecorators(decor.Name(title, decor.WCSyncSpaceR)),
		mpb.AppendDecorators(
			decor.Counters(decor.SizeB1024(0), "% .1f / % .1f", decor.WCSyncSpace),
			decor.AverageSpeed(decor.SizeB1024(0), "% .1f", decor.WCSyncSpace),
			// Elapsed time keeps moving while a large blob uploads.
			decor.Elapsed(decor.ET_STYLE_GO, decor.WCSyncSpace),
			decor.OnComplete(decor.AverageETA(decor.ET_STYLE_GO, decor.WCSyncSpace), "done"),
		),
	)
	t.size = total
	b.mu.Lock()
	b.active = p
	b.mu.Unlock()
	return t
}

type barTransfer struct {
	b     *Bars
	p     *mpb.Progress
	total *mpb.Bar
	mu    sync.Mutex
	size  int64
	grow  bool
	items []*mpb.Bar
}

func (t *barTransfer) Item(name string, size int64) progress.Item {
	t.mu.Lock()
	if t.grow {
		t.size += size
		t.total.SetTotal(t.size, false)
	}
	t.mu.Unlock()
	bar := t.p.New(size,
		mpb.BarStyle().Lbound("[").Filler("-").Tip(">").Padding(" ").Rbound("]"),
		mpb.BarRemoveOnComplete(),
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR)),
		mpb.AppendDecorators(
			decor.Counters(decor.SizeB1024(0), "% .1f / % .1f", decor.WCSyncSpace),
			decor.AverageSpeed(decor.SizeB1024(0), "% .1f", decor.WCSyncSpace),
			decor.AverageETA(decor.ET_STYLE_GO, decor.WCSyncSpace),
		),
	)
	t.mu.Lock()
	t.items = append(t.items, bar)
	t.mu.Unlock()
	return &barItem{t: t, bar: bar, size: size}
}

func (t *barTransfer) Skip(size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.grow {
		t.size -= size
		t.total.SetTotal(t.size, false)
	}
}

func (t *barTransfer) End(err error) {
	// Items a failure left unfinished are dropped: the container waits
	// for every bar to end.
	t.mu.Lock()
	for _, bar := range t.items {
		bar.Abort(true)
	}
	t.mu.Unlock()
	if err != nil {
		t.total.Abort(false)
	} else {
		// Complete the total bar at what was moved: items that were
		// skipped or smaller than announced leave nothing outstanding.
		t.total.SetTotal(-1, true)
	}
	t.p.Wait()
	t.b.mu.Lock()
	if t.b.active == t.p {
		t.b.active = nil
	}
	t.b.mu.Unlock()
}

type barItem struct {
	t    *barTransfer
	bar  *mpb.Bar
	mu   sync.Mutex
	done int64
	size int64
}

func (i *barItem) Add(n int64) {
	i.mu.Lock()
	i.done += n
	i.mu.Unlock()
	i.bar.IncrInt64(n)
	i.t.total.IncrInt64(n)
}

func (i *barItem) Done() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.bar.Completed() {
		i.bar.SetTotal(-1, true)
	}
}
