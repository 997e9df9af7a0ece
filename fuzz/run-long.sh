#!/usr/bin/env bash
# Long local fuzzing run: every harness in parallel, split over CPU cores with
# libFuzzer's -jobs/-workers, until RUNS executions per harness (summed over
# its jobs) or SECONDS seconds.  Usage:
#   fuzz/run-long.sh BUILD_DIR OUT_DIR [RUNS=10000000] [SECONDS=540]
# Per-harness job counts: HARNESS_JOBS="backend=6 kv_cache=3 metadata=3 slot_mapping=2 v0=1".
# Prints one line per harness: total runs, crashes (artifacts in OUT_DIR/<name>/).
set -uo pipefail
BUILD=$(realpath "$1"); OUT=$(realpath -m "$2"); RUNS=${3:-10000000}; SECS=${4:-540}
SRC=$(cd "$(dirname "$0")" && pwd)
JOBS_SPEC=${HARNESS_JOBS:-backend=6 kv_cache=3 metadata=3 slot_mapping=2 v0=1}
mkdir -p "$OUT"
pids=()
for spec in $JOBS_SPEC; do
  name=${spec%=*}; j=${spec#*=}
  exe="$BUILD/fuzz_$name"; [[ -x $exe ]] || continue
  mkdir -p "$OUT/$name/corpus"
  per=$(( (RUNS + j - 1) / j ))
  ( cd "$OUT/$name" && "$exe" -jobs="$j" -workers="$j" -runs="$per" -max_total_time="$SECS" \
      -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$OUT/$name/" \
      corpus "$SRC/corpus/$name" >/dev/null 2>&1 ) &
  pids+=($!)
done
wait "${pids[@]}"
for spec in $JOBS_SPEC; do
  name=${spec%=*}
  total=$(cat "$OUT/$name"/fuzz-*.log 2>/dev/null | grep -o 'stat::number_of_executed_units: *[0-9]*' | awk '{s+=$2} END {print s+0}')
  crashes=$(ls "$OUT/$name" | grep -cE '^(crash|leak|oom|timeout)-')
  echo "$name: $total runs, $crashes artifacts"
done
