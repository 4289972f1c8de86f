#!/usr/bin/env bash
# Two suites side by side (docs/testing.md): clones HEAD of this checkout twice into a new temp
# directory and runs the README's two commands (.ci/run) in both at the same moment, ROUNDS times
# in a row (default 3), all at the commit HEAD was when it started. Prints one line per clone and
# round (exit code, wall time, and the event-loop stalls the run noted) and keeps the logs in the
# temp directory. Run it alone on the machine: it is the busy machine.
set -uo pipefail
rounds=${1:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse HEAD)
work=$(mktemp -d "${TMPDIR:-/tmp}/warden-side-by-side-XXXXXX")
echo "commit ${commit:0:7}, $rounds rounds, logs in $work"
for round in $(seq 1 "$rounds"); do
  # Every round runs the commit HEAD was at the start, whatever is committed meanwhile.
  for c in a b; do rm -rf "$work/$c"; git clone -q "$repo" "$work/$c" && git -C "$work/$c" checkout -q "$commit"; done
  for c in a b; do
    (
      cd "$work/$c" || exit 1
      started=$(date +%s)
      ./.ci/run > "$work/round$round-$c.log" 2>&1
      rc=$?
      log="$work/round$round-$c.log"
      longest=$(grep -o 'event loop held [0-9]* ms' "$log" | awk '$4 > m { m = $4 } END { print m + 0 }')
      echo "round $round clone $c: exit $rc, $(( $(date +%s) - started )) s ($(grep -E '^ +Tests ' "$log" | tail -1 | xargs)), longest event-loop stall ${longest} ms"
    ) &
  done
  wait
done
