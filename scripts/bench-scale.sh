#!/usr/bin/env bash
# The scale test at measured sizes (bench/scale): a round of generated rollout
# submissions evaluated by one validator, verdicts by every validator, and the
# consensus record. Prints one Markdown table; docs/PERFORMANCE.md records it.
# SCALE_SIZES overrides the sizes: "miners:rows:validators ...".
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES="${SCALE_SIZES:-64:10000:16 128:10000:16 256:10000:16 16:100000:16 64:100000:16}"
out=$(mktemp)
trap 'rm -f "$out" "$out.bin"' EXIT
go test -c -o "$out.bin" ./bench/scale/
echo "| miners | rows per submission | validators | commit and reveal: wall / peak RSS | evaluate, one validator | other validators' verdicts | consensus | store: submissions | store: all | consensus record layer / votes payload, bytes | load average |"
echo "|---:|---:|---:|---|---|---|---|---:|---:|---:|---|"
for s in $SIZES; do
  IFS=: read -r m r v <<<"$s"
  "$out.bin" -test.run TestScaleRound -test.timeout 120m \
    -scale.miners "$m" -scale.rows "$r" -scale.validators "$v" -scale.report "$out" >/dev/null
  tail -1 "$out"
done
