#!/usr/bin/env bash
# Model-sized artifacts: feval pack --model, push and pull of a generated model
# tree (default 4 GiB of bfloat16 safetensors shards, the size of a 2B-parameter
# model) beside sha256sum, tar | zstd -T0 and oras, in the same run, timed with
# hyperfine in interleaved rounds and summarised as medians and paired ratios.
#
# Run through `make bench` (after scripts/bench.sh) or alone once bin/feval,
# bin/oras and bin/registry exist. Needs about 5x the model size of free disk.
#
# Environment:
#   BENCH_MODEL_BYTES  weight bytes of the generated model (default 4294967296)
#   BENCH_MODEL_RUNS   timed rounds (default 3; no warm-up round: preparing the
#                      source store and registry reads everything once)
#   BENCH_RESULTS      if set, a directory that receives the JSON exports and
#                      model-summary.md
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
GO=${GO:-go}
BIN="$PWD/bin"
FEVAL="$BIN/feval"
ORAS="$BIN/oras"
RUNS=${BENCH_MODEL_RUNS:-3}
BYTES=${BENCH_MODEL_BYTES:-4294967296}

for tool in "$FEVAL" "$ORAS" "$BIN/registry" hyperfine zstd python3 curl; do
  command -v "$tool" >/dev/null || { echo "bench-model: $tool is missing; run 'make bench'" >&2; exit 2; }
done

WORK=$(mktemp -d -t feval-bench-model.XXXXXX)
need=$((BYTES * 5 / 1024))
avail=$(df -Pk "$WORK" | awk 'NR==2 {print $4}')
if [ "$avail" -lt "$need" ]; then
  rmdir "$WORK"
  echo "bench-model: $((avail / 1048576)) GiB free under $(dirname "$WORK"), need about $((need / 1048576)) GiB; set BENCH_MODEL_BYTES lower" >&2
  exit 2
fi
REG_PID=""
cleanup() {
  local rc=$?
  if [ -n "$REG_PID" ]; then kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
mkdir -p "$WORK/res" "$WORK/out"
section() { printf '\n== %s (load average %s)\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }

section "generate the model tree ($BYTES bytes of weights)"
"$GO" test -c -o "$WORK/benchtree" ./bench
"$WORK/benchtree" -bench.model "$WORK/model" -bench.model.bytes "$BYTES"
MODEL="$WORK/model"
MODEL_BYTES=$(find "$MODEL" -type f -printf '%s\n' | python3 -c 'import sys; print(sum(map(int, sys.stdin)))')
FILES=$(cd "$MODEL" && find . -type f -printf '%P\n' | LC_ALL=C sort | tr '\n' ' ')
echo "model: $(echo $FILES | wc -w) files, $MODEL_BYTES bytes"

export FEVAL_KEY="$WORK/keys/bench.key" FEVAL_PASSWORD="bench-password"
FEVAL_STORE="$WORK/src-store" "$FEVAL" init >/dev/null
FEVAL_STORE="$WORK/src-store" "$FEVAL" key generate >/dev/null
DIGEST=$(FEVAL_STORE="$WORK/src-store" "$FEVAL" pack --model --kind submission "$MODEL")
echo "model artifact $DIGEST"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
REGROOT="$WORK/registry"
cat >"$WORK/registry.yml" <<YML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $REGROOT}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$PORT}
YML
OTEL_TRACES_EXPORTER=none "$BIN/registry" serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
REG_PID=$!
for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$PORT/v2/" >/dev/null 2>&1 && break; sleep 0.1; done
REG="127.0.0.1:$PORT"
RESET_REG="rm -rf '$REGROOT/docker'"

NAMES=() PREPS=() CMDS=()
add() { NAMES+=("$1"); PREPS+=("$2"); CMDS+=("$3"); printf -- '-- %s: %s\n' "$1" "$3"; }
run_group() {
  local n=${#NAMES[@]} r k i
  for ((r = 1; r <= RUNS; r++)); do
    for ((k = 0; k < n; k++)); do
      i=$(((k + r) % n))
      hyperfine --style none --runs 1 --prepare "${PREPS[$i]}" --command-name "${NAMES[$i]}" \
        --export-json "$WORK/res/${NAMES[$i]}.$r.json" "${CMDS[$i]}"
      python3 -c 'import json,sys; x=json.load(open(sys.argv[1]))["results"][0]; print("%-18s round %s: %.3f s wall, %.3f s cpu, load %s" % (sys.argv[2], sys.argv[3], x["mean"], x["user"]+x["system"], open("/proc/loadavg").read().split()[0]))' \
        "$WORK/res/${NAMES[$i]}.$r.json" "${NAMES[$i]}" "$r"
    done
  done
  NAMES=() PREPS=() CMDS=()
}

section "pack: the model tree"
add sha256sum "true" \
  "cd '$MODEL' && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum >'$WORK/out/sums'"
add tar-zstd-T0 "rm -f '$WORK/out/model.tar.zst'" \
  "tar -cf - -C '$WORK' model | zstd -3 -T0 -q >'$WORK/out/model.tar.zst'"
add feval-pack-model "rm -rf '$WORK/pack-store' && FEVAL_STORE='$WORK/pack-store' '$FEVAL' init >/dev/null" \
  "FEVAL_STORE='$WORK/pack-store' '$FEVAL' pack --model --kind submission '$MODEL' >/dev/null"
run_group
ZSTD_BYTES=$(stat -c %s "$WORK/out/model.tar.zst")
[ "$(FEVAL_STORE="$WORK/pack-store" "$FEVAL" pack --model --kind submission "$MODEL")" = "$DIGEST" ] ||
  { echo "bench-model: pack is not reproducible" >&2; exit 1; }
rm -rf "$WORK/pack-store" "$WORK/out/model.tar.zst"

section "push: to an empty registry each run"
add feval-push-model "$RESET_REG" \
  "FEVAL_STORE='$WORK/src-store' '$FEVAL' push '$DIGEST' '$REG/bench/m:t' >/dev/null"
add oras-push-model "$RESET_REG" \
  "cd '$MODEL' && '$ORAS' push --plain-http '$REG/bench/o:t' $FILES >/dev/null"
run_group

section "pull: into an empty store or directory each run"
eval "$RESET_REG"
FEVAL_STORE="$WORK/src-store" "$FEVAL" push "$DIGEST" "$REG/bench/m:t" >/dev/null
(cd "$MODEL" && "$ORAS" push --plain-http "$REG/bench/o:t" $FILES >/dev/null)
add feval-pull-model "rm -rf '$WORK/pull-store' && FEVAL_STORE='$WORK/pull-store' '$FEVAL' init >/dev/null" \
  "FEVAL_STORE='$WORK/pull-store' '$FEVAL' pull '$REG/bench/m:t' >/dev/null"
add oras-pull-model "rm -rf '$WORK/oras-out'" \
  "'$ORAS' pull --plain-http -o '$WORK/oras-out' '$REG/bench/o:t' >/dev/null"
add oras-pull-model-sync "rm -rf '$WORK/oras-out'" \
  "'$ORAS' pull --plain-http -o '$WORK/oras-out' '$REG/bench/o:t' >/dev/null && find '$WORK/oras-out' -type f -exec sync {} +"
run_group
# What was pulled is what was packed.
FEVAL_STORE="$WORK/pull-store" "$FEVAL" verify --pub "$WORK/keys/bench.pub" "$DIGEST" >/dev/null
FEVAL_STORE="$WORK/pull-store" "$FEVAL" unpack "$DIGEST" "$WORK/unpacked" >/dev/null
diff -r "$WORK/unpacked" "$MODEL" >/dev/null
diff -r "$WORK/oras-out" "$MODEL" >/dev/null

section "summary"
python3 - "$WORK/res" "$RUNS" "$MODEL_BYTES" "$ZSTD_BYTES" <<'PY' | tee "$WORK/res/model-summary.md"
import json, statistics, sys
res, runs, model, zst = sys.argv[1], *map(int, sys.argv[2:])
rows = [
    ("sha256sum", "`sha256sum` of every file (the floor: every byte hashed once)", []),
    ("tar-zstd-T0", "`tar -cf - model \\| zstd -3 -T0 > out`", []),
    ("feval-pack-model", "`feval pack --model --kind submission model`, fresh store", ["sha256sum", "tar-zstd-T0"]),
    ("feval-push-model", "`feval push DIGEST REF`: every file, config, signature", ["oras-push-model"]),
    ("oras-push-model", "`oras push REF <every file>`", []),
    ("feval-pull-model", "`feval pull REF` into a fresh store (fsyncs every blob)", ["oras-pull-model", "oras-pull-model-sync"]),
    ("oras-pull-model", "`oras pull -o DIR REF`", []),
    ("oras-pull-model-sync", "the same, then `sync` of every pulled file", []),
]
wall, cpu = {}, {}
for name, *_ in rows:
    rs = [json.load(open(f"{res}/{name}.{r}.json"))["results"][0] for r in range(1, runs + 1)]
    wall[name], cpu[name] = [x["mean"] for x in rs], [x["user"] + x["system"] for x in rs]
med = statistics.median
paired = lambda a, b, d: med([x / y for x, y in zip(d[a], d[b])])
print(f"Model tree {model} bytes; medians of {runs} interleaved rounds; MB = 10^6 bytes.")
print()
print("| step | what runs | median s | min-max s | MB/s | CPU s | feval / peer |")
print("|---|---|---:|---:|---:|---:|---|")
for name, what, peers in rows:
    m = med(wall[name])
    ratio = "; ".join(f"{p} {paired(name, p, wall):.2f}x (CPU {paired(name, p, cpu):.2f}x)" for p in peers)
    print(f"| {name} | {what} | {m:.2f} | {min(wall[name]):.2f}-{max(wall[name]):.2f} | {model / 1e6 / m:.0f} | {med(cpu[name]):.2f} | {ratio} |")
print()
print(f"tar | zstd -3 -T0 output: {zst} bytes ({zst / model:.3f} of the tree); feval stores the files raw (1.000).")
print()
for what, a, b, goal in [("pack", "feval-pack-model", "sha256sum", 1.1), ("push", "feval-push-model", "oras-push-model", 1.0),
                         ("pull", "feval-pull-model", "oras-pull-model", 1.0), ("pull", "feval-pull-model", "oras-pull-model-sync", 1.0)]:
    w = paired(a, b, wall)
    print(f"- goal {what} <= {goal}x {b}: {w:.2f}x ({'met' if w <= goal else 'missed'})")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${BENCH_RESULTS:-}" ]; then
  mkdir -p "$BENCH_RESULTS"
  cp "$WORK"/res/* "$BENCH_RESULTS"/
fi
