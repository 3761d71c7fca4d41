// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package backoff_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"podmin.dev/podmin/internal/backoff"
	"podmin.dev/podmin/internal/clock/fakeclock"
)

func TestDelayDoublesUpToTheCap(t *testing.T) {
	p := backoff.Policy{Min: 250 * time.Millisecond, Max: 2 * time.Second}
	var got []time.Duration
	for n := 0; n <= 6; n++ {
		got = append(got, p.Delay(n))
	}
	want := []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		2 * time.Second, 2 * time.Second, 2 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	// A cap below the first step is the wait.
	if d := (backoff.Policy{Min: time.Second, Max: 100 * time.Millisecond}).Delay(1); d != 100*time.Millisecond {
		t.Fatalf("capped first delay %v", d)
	}
	if d := (backoff.Policy{Max: time.Second}).Delay(5); d != 0 {
		t.Fatalf("no minimum: %v, want no wait", d)
	}
}

func TestJitterStaysInTheUpperHalf(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999999} {
		p := backoff.Policy{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond, Rand: func() float64 { return r }}
		for n, d := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond} {
			got := p.Delay(n + 1)
			if got < d/2 || got >= d {
				t.Errorf("rand %v, failure %d: %v outside [%v, %v)", r, n+1, got, d/2, d)
			}
			if want := d/2 + time.Duration(r*float64(d/2)); got != want {
				t.Errorf("rand %v, failure %d: %v, want %v", r, n+1, got, want)
			}
		}
	}
}

// A retry loop on a fake clock waits exactly the schedule: after each
// failure its timer is set for the delay, and the next attempt happens
// when the clock reaches it.
func TestRetryLoopOnAFakeClock(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clk := fakeclock.New(start)
	p := backoff.Policy{Min: time.Second, Max: 4 * time.Second}
	attempts := make(chan time.Time, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for n := 1; ; n++ {
			attempts <- clk.Now() // the attempt fails
			select {
			case <-clk.After(p.Delay(n)):
			case <-ctx.Done():
				return
			}
		}
	}()
	want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second}
	for i, w := range want {
		at := <-attempts
		if got := at.Sub(start); got != w {
			t.Fatalf("attempt %d at +%v, want +%v", i+1, got, w)
		}
		if i == len(want)-1 {
			break
		}
		next := start.Add(want[i+1])
		deadline := time.Now().Add(10 * time.Second)
		for !clk.Waiting(next) {
			if time.Now().After(deadline) {
				t.Fatalf("attempt %d: the loop does not wait until +%v", i+2, want[i+1])
			}
			time.Sleep(time.Millisecond)
		}
		clk.Advance(next.Sub(clk.Now()))
	}
}
