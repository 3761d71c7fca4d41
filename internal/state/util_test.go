// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"errors"
	"strings"
	"testing"
)

// checkErr asserts err is nil when want is empty and otherwise contains want.
func checkErr(t testing.TB, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: unexpected error %v", what, err)
	case want != "" && err == nil:
		t.Errorf("%s: no error, want %q", what, want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("%s: error %q does not contain %q", what, err, want)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
