#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Sourced by scripts/e2e.sh and scripts/e2e-cluster.sh: turns a real-machine
# test's report into the one summary line both print and write, and the
# script's exit status. The caller defines say (print and write the summary
# line).

# e2e_finish NAME STATUS REPORT LOG START: NAME is the report's own prefix
# (e2e, e2e-cluster), STATUS the go test exit status, START the script's
# $SECONDS when it began. The test announces how many
# proofs it runs ("NAME proofs: N"); a report without that line, or with
# fewer proof lines, is a run that broke off. Proofs are numbered, some with
# a letter (4b). Exits the script: 1 when something failed, else 0.
e2e_finish() {
  local name=$1 status=$2 report=$3 log=$4 start=$5 took total passed
  took="$(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s"
  if grep -q "^$name NOT RUN: " "$report" 2>/dev/null; then
    say "$name: NOT RUN: $(sed -n "s/^$name NOT RUN: //p" "$report" | head -n 1)"
    exit 0
  fi
  total=$(sed -n "s/^$name proofs: \([0-9][0-9]*\)\$/\1/p" "$report" 2>/dev/null | head -n 1)
  total=${total:-0}
  passed=$(grep -cE '^proof [0-9]+b? PASS' "$report" 2>/dev/null || true)
  local -a failed notrun
  mapfile -t failed < <(grep -oE '^proof [0-9]+b? FAIL' "$report" 2>/dev/null | cut -d' ' -f2)
  mapfile -t notrun < <(grep -E '^proof [0-9]+b? NOT RUN' "$report" 2>/dev/null | sed -E 's/^proof ([0-9]+b?) NOT RUN \((.*)\): .*/proof \1 (\2)/')
  if ((status != 0 || ${#failed[@]} > 0 || total == 0 || passed + ${#notrun[@]} < total)); then
    grep -E '^\s*--- FAIL|^panic:|_test\.go:[0-9]+:' "$log" | head -n 60 || true
    if ((total == 0)); then
      say "$name: FAILED in $took: the test ended before its proofs started; see $log"
    else
      say "$name: FAILED in $took: $passed of $total proofs passed${failed:+; failed: proof ${failed[*]}}${notrun:+; NOT RUN: ${notrun[*]}}; see $log"
    fi
    exit 1
  fi
  if ((${#notrun[@]} > 0)); then
    say "$name: passed $passed of $total proofs in $took; NOT RUN here: ${notrun[*]}"
    exit 0
  fi
  say "$name: passed $passed of $total proofs in $took (tool builds included); log: $log"
  exit 0
}
