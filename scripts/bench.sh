#!/usr/bin/env bash
# Storage benchmarks: feval pack, push and pull of one 256 MiB tree, each beside
# its peer in the same run (sha256sum, tar | zstd -3 -T1, oras push / oras pull),
# timed with hyperfine and summarised as medians, MB/s and ratios.
#
# Run through `make bench` (it builds bin/feval and the tools first). Everything
# lives in a throw-away directory and a loopback registry, removed at the end.
#
# Environment:
#   BENCH_RUNS     timed rounds (default 7; a warm-up round comes first)
#   BENCH_RESULTS  if set, a directory that receives the hyperfine JSON exports,
#                  summary.md and machine.txt
#   BENCH_ONLY     "tiny": only the push and pull of a one-file artifact beside
#                  oras (the fixed cost), then the summary; nothing else runs
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
GO=${GO:-go}
BIN="$PWD/bin"
FEVAL="$BIN/feval"
ORAS="$BIN/oras"
RUNS=${BENCH_RUNS:-7}
ONLY=${BENCH_ONLY:-}
case "$ONLY" in ""|tiny) ;; *) echo "bench: BENCH_ONLY=$ONLY: want tiny or nothing" >&2; exit 2 ;; esac
full() { [ -z "$ONLY" ]; }

for tool in "$FEVAL" "$ORAS" "$BIN/registry"; do
  [ -x "$tool" ] || { echo "bench: $tool is missing; run 'make bench'" >&2; exit 2; }
done

# Debian packages the benchmark needs, installed on first use.
need=""
for pair in hyperfine:hyperfine zstd:zstd curl:curl python3:python3 bwrap:bubblewrap; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need="$need ${pair#*:}"
done
if [ -n "$need" ]; then
  echo "bench: installing Debian packages:$need" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi

WORK=$(mktemp -d -t feval-bench.XXXXXX)
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

section "machine"
{
  echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "memory:  $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel:  $(uname -sr)"
  echo "disk:    $(df -hT "$WORK" | awk 'NR==2 {print $2 " on " $1 ", " $7}')"
  echo "tools:   feval $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- 2>/dev/null || echo '+changes'), oras $("$ORAS" version | head -1 | awk '{print $2}'), $(hyperfine --version), $(zstd --version | sed 's/^\*\*\* //; s/, by.*//'), $(tar --version | head -1), $($GO version | cut -d' ' -f3)"
  echo "runs:    $RUNS timed rounds after 1 warm-up round, commands of a group interleaved"
} | tee "$WORK/res/machine.txt"

TREE="$WORK/tree" TREE_BYTES=0 LAYER_BYTES=0 ZSTD_BYTES=0 GZ_BYTES=0
if full; then
section "generate the 256 MiB tree"
"$GO" test -c -o "$WORK/benchtree" ./bench
"$WORK/benchtree" -bench.tree "$WORK/tree"
TREE_BYTES=$(find "$TREE" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
# Read the tree once so that every command below starts from the page cache.
find "$TREE" -type f -exec cat {} + >/dev/null
fi

section "a store and a signing key"
mkdir -p "$WORK/tiny" && echo "one small file" >"$WORK/tiny/readme.txt"
export FEVAL_KEY="$WORK/keys/bench.key"
export FEVAL_PASSWORD="bench-password"
FEVAL_STORE="$WORK/src-store" "$FEVAL" init >/dev/null
FEVAL_STORE="$WORK/src-store" "$FEVAL" key generate >/dev/null
TINY=$(FEVAL_STORE="$WORK/src-store" "$FEVAL" pack --kind submission "$WORK/tiny")
if full; then
DIGEST=$(FEVAL_STORE="$WORK/src-store" "$FEVAL" pack --kind submission "$TREE")
echo "artifact $DIGEST"
# The tree layer feval made, as a plain file for oras to push.
LAYER=$(python3 - "$WORK/src-store" "$DIGEST" <<'PY'
import json, sys
root, dig = sys.argv[1], sys.argv[2]
m = json.load(open(f"{root}/blobs/sha256/{dig.split(':')[1]}"))
print(m["layers"][1]["digest"].split(":")[1])
PY
)
mkdir -p "$WORK/payload"
cp "$WORK/src-store/blobs/sha256/$LAYER" "$WORK/payload/tree.tar.zst"
LAYER_BYTES=$(stat -c %s "$WORK/payload/tree.tar.zst")
echo "tree: $(find "$TREE" -type f | wc -l) files, $TREE_BYTES bytes; feval layer: $LAYER_BYTES bytes"
fi

section "start a throw-away OCI registry on 127.0.0.1"
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
for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$PORT/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/v2/" >/dev/null
REG="127.0.0.1:$PORT"
echo "registry at $REG"
# The registry keeps no cache (none is configured): removing its storage between
# runs gives every push an empty registry, for feval and oras alike.
RESET_REG="rm -rf '$REGROOT/docker'"

# A group of commands is timed in rounds: round 0 runs each command once as a
# warm-up, rounds 1..RUNS time each once, starting from a different command each
# round. Interleaving exposes every command of a group to the same load, so the
# ratios of one round compare like with like on a machine doing other work.
NAMES=() PREPS=() CMDS=()
add() { NAMES+=("$1"); PREPS+=("$2"); CMDS+=("$3"); printf -- '-- %s: %s\n' "$1" "$3"; }
run_group() {
  local n=${#NAMES[@]} r k i
  for ((r = 0; r <= RUNS; r++)); do
    for ((k = 0; k < n; k++)); do
      i=$(((k + r) % n))
      hyperfine --style none --runs 1 --prepare "${PREPS[$i]}" --command-name "${NAMES[$i]}" \
        --export-json "$WORK/res/${NAMES[$i]}.$r.json" "${CMDS[$i]}"
      python3 -c 'import json,sys; x=json.load(open(sys.argv[1]))["results"][0]; w=" (warm-up)" if sys.argv[3]=="0" else ""; print("%-16s round %s%s: %.3f s wall, %.3f s cpu" % (sys.argv[2], sys.argv[3], w, x["mean"], x["user"]+x["system"]))' \
        "$WORK/res/${NAMES[$i]}.$r.json" "${NAMES[$i]}" "$r"
    done
  done
  rm -f "$WORK"/res/*.0.json
  NAMES=() PREPS=() CMDS=()
}

if full; then
section "pack: 256 MiB tree"
add sha256sum "true" \
  "cd '$TREE' && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum >'$WORK/out/sums'"
add tar-zstd "rm -f '$WORK/out/tree.tar.zst'" \
  "tar -cf - -C '$WORK' tree | zstd -3 -T1 -q >'$WORK/out/tree.tar.zst'"
add tar-zstd-fsync "rm -f '$WORK/out/tree.tar.zst'" \
  "tar -cf - -C '$WORK' tree | zstd -3 -T1 -q >'$WORK/out/tree.tar.zst' && sync '$WORK/out/tree.tar.zst'"
add feval-pack "rm -rf '$WORK/pack-store' && FEVAL_STORE='$WORK/pack-store' '$FEVAL' init >/dev/null" \
  "FEVAL_STORE='$WORK/pack-store' '$FEVAL' pack --kind submission '$TREE' >/dev/null"
add feval-pack-tiny "rm -rf '$WORK/tiny-store' && FEVAL_STORE='$WORK/tiny-store' '$FEVAL' init >/dev/null" \
  "FEVAL_STORE='$WORK/tiny-store' '$FEVAL' pack --kind submission '$WORK/tiny' >/dev/null"
run_group
ZSTD_BYTES=$(stat -c %s "$WORK/out/tree.tar.zst")
[ "$(FEVAL_STORE="$WORK/pack-store" "$FEVAL" pack --kind submission "$TREE")" = "$DIGEST" ] ||
  { echo "bench: pack is not reproducible" >&2; exit 1; }
fi

section "push: to an empty registry each run"
if full; then
add feval-push "$RESET_REG" \
  "FEVAL_STORE='$WORK/src-store' '$FEVAL' push '$DIGEST' '$REG/bench/x:t' >/dev/null"
add oras-push "$RESET_REG" \
  "cd '$WORK/payload' && '$ORAS' push --plain-http '$REG/bench/y:t' 'tree.tar.zst:application/vnd.feval.tree.v1.tar+zstd' >/dev/null"
add oras-push-dir "$RESET_REG" \
  "cd '$WORK' && '$ORAS' push --plain-http '$REG/bench/z:t' tree >/dev/null"
fi
add feval-push-tiny "$RESET_REG" \
  "FEVAL_STORE='$WORK/src-store' '$FEVAL' push '$TINY' '$REG/bench/xt:t' >/dev/null"
add oras-push-tiny "$RESET_REG" \
  "cd '$WORK/tiny' && '$ORAS' push --plain-http '$REG/bench/yt:t' readme.txt >/dev/null"
run_group

section "pull: into an empty store or directory each run"
eval "$RESET_REG"
FEVAL_STORE="$WORK/src-store" "$FEVAL" push "$TINY" "$REG/bench/xt:t" >/dev/null
(cd "$WORK/tiny" && "$ORAS" push --plain-http "$REG/bench/yt:t" readme.txt >/dev/null)
if full; then
FEVAL_STORE="$WORK/src-store" "$FEVAL" push "$DIGEST" "$REG/bench/x:t" >/dev/null
(cd "$WORK/payload" && "$ORAS" push --plain-http "$REG/bench/y:t" "tree.tar.zst:application/vnd.feval.tree.v1.tar+zstd" >/dev/null)
(cd "$WORK" && "$ORAS" push --plain-http "$REG/bench/z:t" tree >/dev/null)
GZ_BYTES=$("$ORAS" manifest fetch --plain-http "$REG/bench/z:t" | python3 -c 'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))')
add feval-pull "rm -rf '$WORK/pull-store' && FEVAL_STORE='$WORK/pull-store' '$FEVAL' init >/dev/null" \
  "FEVAL_STORE='$WORK/pull-store' '$FEVAL' pull '$REG/bench/x:t' >/dev/null"
add oras-pull "rm -rf '$WORK/oras-out'" \
  "'$ORAS' pull --plain-http -o '$WORK/oras-out' '$REG/bench/y:t' >/dev/null"
add oras-pull-fsync "rm -rf '$WORK/oras-out'" \
  "'$ORAS' pull --plain-http -o '$WORK/oras-out' '$REG/bench/y:t' >/dev/null && sync '$WORK/oras-out/tree.tar.zst'"
add oras-pull-dir "rm -rf '$WORK/oras-dir'" \
  "'$ORAS' pull --plain-http -o '$WORK/oras-dir' '$REG/bench/z:t' >/dev/null"
fi
add feval-pull-tiny "rm -rf '$WORK/pull-tiny' && FEVAL_STORE='$WORK/pull-tiny' '$FEVAL' init >/dev/null" \
  "FEVAL_STORE='$WORK/pull-tiny' '$FEVAL' pull '$REG/bench/xt:t' >/dev/null"
add oras-pull-tiny "rm -rf '$WORK/oras-tiny'" \
  "'$ORAS' pull --plain-http -o '$WORK/oras-tiny' '$REG/bench/yt:t' >/dev/null"
run_group
# What was pulled is what was pushed.
FEVAL_STORE="$WORK/pull-tiny" "$FEVAL" verify --pub "$WORK/keys/bench.pub" "$TINY" >/dev/null
cmp "$WORK/oras-tiny/readme.txt" "$WORK/tiny/readme.txt"
if full; then
FEVAL_STORE="$WORK/pull-store" "$FEVAL" verify --pub "$WORK/keys/bench.pub" "$DIGEST" >/dev/null
cmp "$WORK/oras-out/tree.tar.zst" "$WORK/payload/tree.tar.zst"
diff -r "$WORK/oras-dir/tree" "$TREE" >/dev/null

section "where pack time goes (Go benchmarks on the same mix at 16 MiB)"
"$WORK/benchtree" -test.run '^$' -test.bench . -test.benchtime 5x | grep -E '^(Benchmark|cpu:)'
fi

section "summary"
python3 - "$WORK/res" "$RUNS" "$TREE_BYTES" "$LAYER_BYTES" "$ZSTD_BYTES" "$GZ_BYTES" <<'PY' | tee "$WORK/res/summary.md"
import json, statistics, sys
res, runs, tree, layer, zst, gz = sys.argv[1], *map(int, sys.argv[2:])
rows = [
    # name, what it does, bytes it moves, peers it is compared with
    ("sha256sum", "`sha256sum` of every file", tree, []),
    ("tar-zstd", "`tar -cf - tree \\| zstd -3 -T1 > out`", tree, []),
    ("tar-zstd-fsync", "the same, then `sync out` (fsync, as feval does)", tree, []),
    ("feval-pack", "`feval pack --kind submission tree`, fresh store", tree, ["tar-zstd", "tar-zstd-fsync", "sha256sum"]),
    ("feval-pack-tiny", "`feval pack` of a one-file tree (fixed cost)", 0, []),
    ("feval-push", "`feval push DIGEST REF`: tree layer, record, signature", layer, ["oras-push"]),
    ("oras-push", "`oras push REF tree.tar.zst` (feval's layer as a file)", layer, []),
    ("oras-push-dir", "`oras push REF tree/` (oras makes a tar+gzip)", gz, []),
    ("feval-push-tiny", "`feval push` of the one-file artifact (fixed cost)", 0, ["oras-push-tiny"]),
    ("oras-push-tiny", "`oras push` of one small file (fixed cost)", 0, []),
    ("feval-pull", "`feval pull REF` into a fresh store (fsyncs each blob)", layer, ["oras-pull", "oras-pull-fsync"]),
    ("oras-pull", "`oras pull -o DIR REF` of tree.tar.zst", layer, []),
    ("oras-pull-fsync", "the same, then `sync` of the pulled file", layer, []),
    ("oras-pull-dir", "`oras pull -o DIR REF` of the tar+gzip (unpacks it)", gz, []),
    ("feval-pull-tiny", "`feval pull` of the one-file artifact (fixed cost)", 0, ["oras-pull-tiny"]),
    ("oras-pull-tiny", "`oras pull` of one small file (fixed cost)", 0, []),
]
import os
rows = [r for r in rows if os.path.exists(f"{res}/{r[0]}.1.json")]  # BENCH_ONLY runs a part
wall, cpu = {}, {}
for name, *_ in rows:
    rs = [json.load(open(f"{res}/{name}.{r}.json"))["results"][0] for r in range(1, runs + 1)]
    wall[name] = [x["mean"] for x in rs]
    cpu[name] = [x["user"] + x["system"] for x in rs]
med = lambda xs: statistics.median(xs)
# feval / peer per round (both ran in the same round), then the median.
paired = lambda a, b, d: med([x / y for x, y in zip(d[a], d[b])])
print(f"Medians of {runs} interleaved rounds; MB = 10^6 bytes; CPU = user + system of all processes.")
print()
print("| step | what runs | MB | median s | min-max s | MB/s | CPU s | feval / peer |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for name, what, nbytes, peers in rows:
    m = med(wall[name])
    rate = f"{nbytes / 1e6 / m:.0f}" if nbytes else "-"
    mb = f"{nbytes / 1e6:.1f}" if nbytes else "-"
    ratio = "; ".join(f"{p} {paired(name, p, wall):.2f}x (CPU {paired(name, p, cpu):.2f}x)" for p in peers)
    print(f"| {name} | {what} | {mb} | {m:.3f} | {min(wall[name]):.3f}-{max(wall[name]):.3f} | {rate} | {med(cpu[name]):.2f} | {ratio} |")
print()
if tree:
    print(f"Sizes: tree {tree} B; feval layer {layer} B ({layer / tree:.3f}); "
          f"tar | zstd -3 {zst} B ({zst / tree:.3f}); oras tar+gzip {gz} B ({gz / tree:.3f}).")
    print()
for what, a, b, goal in [("pack", "feval-pack", "tar-zstd", 1.5), ("push", "feval-push", "oras-push", 1.0), ("pull", "feval-pull", "oras-pull", 1.0),
                         ("push fixed cost", "feval-push-tiny", "oras-push-tiny", 1.1), ("pull fixed cost", "feval-pull-tiny", "oras-pull-tiny", 1.1)]:
    if a not in wall or b not in wall:
        continue
    w, c = paired(a, b, wall), paired(a, b, cpu)
    rounds = sum(x / y <= goal for x, y in zip(wall[a], wall[b]))
    print(f"- goal {what} <= {goal}x {b}: wall {w:.2f}x ({'met' if w <= goal else 'missed'}; met in {rounds} of {runs} rounds), CPU {c:.2f}x")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if ! full; then
  [ -z "${BENCH_RESULTS:-}" ] || { mkdir -p "$BENCH_RESULTS" && cp "$WORK"/res/* "$BENCH_RESULTS"/; }
  exit 0
fi

if [ -n "${BENCH_RESULTS:-}" ]; then
  mkdir -p "$BENCH_RESULTS"
  cp "$WORK"/res/* "$BENCH_RESULTS"/
  echo "results in $BENCH_RESULTS"
fi

echo
echo "## Model-sized artifacts: pack, push and pull of a generated model tree"
./scripts/bench-model.sh

echo
echo "## Rollouts: scoring and audits (one core)"
go test -run '^$' -bench 'ScoreAllRows|Decide' -benchtime 5x -cpu 1 ./protocol/rollouts/
echo "## Rollouts: parsing the reference task once (a process's fixed cost)"
go test -run '^$' -bench 'LoadTask' -benchtime 10x -cpu 1 ./protocol/rollouts/
echo "## Rollouts: feval evaluate against feval evaluate --full, whole processes (3 rounds): a round of 8 miners in one process, and one reveal alone"
BENCH_RUNS=3 ./scripts/bench-audit.sh
echo "## Model-bound rollouts: generating 10,000 rows with the reference tiny model against auditing 320 of them"
go test -run '^$' -bench 'GenerateAndAudit' -benchtime 1x -timeout 30m ./protocol/rollouts/
echo "## Model-bound rollouts: the reference runtime's teacher-forced pass per token against plain torch (one thread each)"
go test -run '^$' -bench 'PrefillPerToken' -benchtime 3x ./model/
echo "## Model-bound rollouts: the model check's memory, loaded against streamed (--runtime)"
go test -run '^$' -bench 'ModelCheck' -benchtime 5x ./model/

echo
echo "## Sandbox: start-up of /bin/true, feval against bwrap (200 runs)"
go test -run '^$' -bench 'StartTrue' -benchtime 200x ./sandbox/

echo
echo "## Meter: p50 overhead and throughput against the fixture upstream called directly"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench 'BenchmarkMeter$' -benchtime 3000x -count 3 ./meter/

echo
echo "## Optimizer: training steps/s in the sandbox against python3 directly, held-out evaluation"
go test -run '^$' -bench 'BenchmarkTraining' -benchtime 5x ./protocol/optimizer/

echo
echo "## Scenarios: a twenty-scenario evaluation and its replay (simulated model latency 1 s + 25 ms/token)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench 'BenchmarkTwentyScenarios' -benchtime 1x ./protocol/scenarios/

echo
echo "## Policy sidecar: policy.json decision, per-form overhead, policy.py start"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench . -benchtime 3s -count 3 ./policy/
