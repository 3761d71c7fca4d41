// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// racers is how many goroutines contend in each race.
const racers = 32

// race runs fn(i) for i in [0, n) on n goroutines released at once, and
// returns their errors by index.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one call succeeded and every other one
// failed with ErrPrecondition, and returns the winner's index.
func oneWinner(t *testing.T, what string, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("%s: writers %d and %d both succeeded", what, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, objstore.ErrPrecondition):
			t.Errorf("%s: writer %d error = %v, want ErrPrecondition", what, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no writer succeeded", what)
	}
	return winner
}

func racerData(i int) []byte { return fmt.Appendf(nil, "written by racer %02d", i) }

func testRacePutIfAbsent(t *testing.T, s objstore.Store) {
	etags := make([]string, racers)
	errs := race(racers, func(i int) (err error) {
		etags[i], err = s.PutIfAbsent(t.Context(), "race/once", racerData(i))
		return err
	})
	w := oneWinner(t, "concurrent PutIfAbsent", errs)
	checkObject(t, s, "race/once", racerData(w), etags[w])
}

func testRacePutIfMatch(t *testing.T, s objstore.Store) {
	base := mustPut(t, s, "race/cas", []byte("base"))
	etags := make([]string, racers)
	errs := race(racers, func(i int) (err error) {
		etags[i], err = s.PutIfMatch(t.Context(), "race/cas", racerData(i), base)
		return err
	})
	w := oneWinner(t, "concurrent PutIfMatch", errs)
	checkObject(t, s, "race/cas", racerData(w), etags[w])
}

// testRaceCounter increments a counter with read-modify-write loops from
// several goroutines; a lost update shows up as a short count.
func testRaceCounter(t *testing.T, s objstore.Store) {
	const workers, increments, maxAttempts = 8, 10, 1000
	mustPut(t, s, "race/counter", []byte("0"))
	errs := race(workers, func(int) error {
		for range increments {
			if err := increment(t, s, "race/counter", maxAttempts); err != nil {
				return err
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	checkObject(t, s, "race/counter", []byte(strconv.Itoa(workers*increments)), "")
}

// increment adds one to the decimal counter at key with a bounded CAS loop.
func increment(t *testing.T, s objstore.Store, key string, maxAttempts int) error {
	for range maxAttempts {
		obj, err := s.Get(t.Context(), key, objstore.GetOptions{})
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(string(obj.Data))
		if err != nil {
			return fmt.Errorf("counter %q holds %q: %w", key, obj.Data, err)
		}
		_, err = s.PutIfMatch(t.Context(), key, []byte(strconv.Itoa(n+1)), obj.ETag)
		if !errors.Is(err, objstore.ErrPrecondition) {
			return err
		}
	}
	return fmt.Errorf("increment %q: still contended after %d attempts", key, maxAttempts)
}

// testRaceDeleteIfMatch deletes with a stale ETag from many goroutines while
// the object is being rewritten: the object must survive. Then deletes with
// the current ETag race: the object must go, with no unexpected errors.
func testRaceDeleteIfMatch(t *testing.T, s objstore.Store) {
	stale := mustPut(t, s, "race/del", []byte("v0"))
	var rewrites []string
	errs := race(racers+1, func(i int) error {
		if i == racers {
			for v := 1; v <= 5; v++ {
				etag, err := s.Put(t.Context(), "race/del", fmt.Appendf(nil, "v%d", v))
				if err != nil {
					return err
				}
				rewrites = append(rewrites, etag)
			}
			return nil
		}
		return s.Delete(t.Context(), "race/del", stale)
	})
	if err := errs[racers]; err != nil {
		t.Fatalf("rewriter: %v", err)
	}
	for i, err := range errs[:racers] {
		// A delete that ran before the first rewrite may succeed; the
		// rewrites then recreate the object.
		if err != nil && !errors.Is(err, objstore.ErrPrecondition) && !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("stale Delete %d: error = %v, want ErrPrecondition", i, err)
		}
	}
	cur := rewrites[len(rewrites)-1]
	checkObject(t, s, "race/del", []byte("v5"), cur)

	errs = race(racers, func(int) error { return s.Delete(t.Context(), "race/del", stale) })
	for i, err := range errs {
		if !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("stale Delete %d after rewrites: error = %v, want ErrPrecondition", i, err)
		}
	}
	checkObject(t, s, "race/del", []byte("v5"), cur)

	errs = race(racers, func(int) error { return s.Delete(t.Context(), "race/del", cur) })
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, objstore.ErrNotFound) && !errors.Is(err, objstore.ErrPrecondition):
			t.Errorf("Delete(current ETag) %d: error = %v, want success, ErrNotFound or ErrPrecondition", i, err)
		}
	}
	if ok == 0 {
		t.Error("no Delete with the current ETag succeeded")
	}
	if _, err := s.Head(t.Context(), "race/del"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Head after Delete(current ETag) error = %v, want ErrNotFound", err)
	}
}
