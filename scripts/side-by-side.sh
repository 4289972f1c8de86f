#!/usr/bin/env bash
# Two suites side by side (docs/testing.md): clones HEAD of this checkout twice into a new temp
# directory and runs the README's two commands (.ci/run) in both at the same moment, ROUNDS times
# in a row (default 3). Prints one line per clone and round (exit code, wall time) and keeps the
# logs in the temp directory. Run it alone on the machine: it is the busy machine.
set -uo pipefail
rounds=${1:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse --short HEAD)
work=$(mktemp -d "${TMPDIR:-/tmp}/warden-side-by-side-XXXXXX")
echo "commit $commit, $rounds rounds, logs in $work"
for round in $(seq 1 "$rounds"); do
  for c in a b; do rm -rf "$work/$c"; git clone -q "$repo" "$work/$c"; done
  for c in a b; do
    (
      cd "$work/$c" || exit 1
      started=$(date +%s)
      ./.ci/run > "$work/round$round-$c.log" 2>&1
      rc=$?
      echo "round $round clone $c: exit $rc, $(( $(date +%s) - started )) s ($(grep -E '^ +Tests ' "$work/round$round-$c.log" | tail -1 | xargs))"
    ) &
  done
  wait
done
