#!/usr/bin/env bash
# Long soak of the random-program differential fuzzer (tests/fuzzing/).
# Usage: bash scripts/fuzz.sh [N] [SEED] [OUT]
#   N     programs (default 2000), run in chunks of $FUZZ_CHUNK (default 250), one
#         process per chunk (bounded memory; a program that hangs inside TensorFlow
#         ends its chunk with status 3 after writing its repro, and the soak goes on)
#   SEED  any string (default: today's date, so each day soaks new programs)
#   OUT   directory for minimized repros and per-chunk summary.json
#         (default ${TMPDIR:-/tmp}/janus-fuzz-SEED)
# Extra options for `python -m tests.fuzzing` go in $FUZZ_ARGS (e.g. "--skip inner_fn").
# Exit status: 0 when no program diverged, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
if [ -z "${FUZZ_NO_SETUP:-}" ]; then janus_setup_env; fi   # FUZZ_NO_SETUP=1: use .venv as is
N="${1:-2000}"
SEED="${2:-$(date +%Y%m%d)}"
OUT="${3:-${TMPDIR:-/tmp}/janus-fuzz-$SEED}"
CHUNK="${FUZZ_CHUNK:-250}"
mkdir -p "$OUT"
status=0
start=0
while [ "$start" -lt "$N" ]; do
  n=$(( N - start < CHUNK ? N - start : CHUNK ))
  echo "== programs $start..$(( start + n - 1 )) of $N (seed $SEED) =="
  # shellcheck disable=SC2086
  "$VENV_PYTHON" -m tests.fuzzing --seed "$SEED" --start "$start" --programs "$n" \
    --out "$OUT/chunk_$start" ${FUZZ_ARGS:-} 2>&1 | grep -v -e '^WARNING: All log' -e '^I0000' \
    -e '^To enable the following' -e 'rebuild TensorFlow with'
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 3 ]; then
    echo "a program hung; see $OUT/chunk_$start/hang_*.py"
    status=1
    # go on after the hung program: find it from the repro name
    hung=$(ls "$OUT/chunk_$start"/hang_*.py 2>/dev/null | sed 's/.*_\([0-9]*\)\.py$/\1/' | sort -n | tail -1)
    if [ -n "$hung" ]; then start=$(( hung + 1 )); continue; fi
  elif [ "$rc" -ne 0 ]; then
    status=1
  fi
  start=$(( start + n ))
done
"$VENV_PYTHON" - "$OUT" <<'PY'
import collections, glob, json, sys
out = sys.argv[1]
kinds, sigs, totals = collections.Counter(), collections.Counter(), collections.Counter()
for path in sorted(glob.glob(out + '/chunk_*/summary.json')):
    s = json.load(open(path))
    totals.update(s['totals'])
    for d in s['divergences']:
        kinds[d['kind']] += 1
        sigs[' '.join(x for x in d['signature'] if x)] += 1
calls = totals['calls']
print('== soak total: %d programs, %d calls, %.1f%% ran a graph, %d diverging ==' % (
    totals['programs'], calls, 100.0 * totals['graph_calls'] / max(calls, 1), sum(kinds.values())))
for sig, n in sigs.most_common():
    print('  %4d  %s' % (n, sig))
print('repros: %s/chunk_*/*.py' % out)
PY
exit $status
