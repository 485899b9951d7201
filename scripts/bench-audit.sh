#!/usr/bin/env bash
# An audit against a full evaluation as whole processes: one round of the
# reference task (10,000 rows) with an honest miner in submission format 2
# (claims file) and one in format 3 (rows layer and rows index, what
# `feval commit` packs a plain rows directory as); `feval evaluate` and
# `feval evaluate --full` of each reveal are timed alternately in the same
# loop, so load from elsewhere falls on both, and the median of the per-round
# ratios is printed. A `feval replay` of each audit verdict is timed in the
# same rounds. BENCH_RUNS sets the rounds (default 7). Uses bin/feval and
# bin/genrollouts (make build).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/bin"
RUNS="${BENCH_RUNS:-7}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export FEVAL_PASSWORD="bench-password" FEVAL_STORE="$WORK/store"
key() { export FEVAL_KEY="$WORK/$1.key"; }

"$BIN/genrollouts" -out "$WORK/f2" -claims 2>/dev/null
"$BIN/genrollouts" -out "$WORK/f1" 2>/dev/null
"$BIN/feval" init >/dev/null
for role in owner m1 m2 validator; do key "$role"; "$BIN/feval" key generate >/dev/null; done

key owner
TASK=$("$BIN/feval" task create --protocol rollouts --tag task "$WORK/f2/task")
ROUND=$("$BIN/feval" round open --task task --commit-until 2026-12-01T00:00:00Z --reveal-until 2026-12-02T00:00:00Z --tag round)
key m1; C1=$("$BIN/feval" commit --round round "$WORK/f2/miners/honest")
key m2; C2=$("$BIN/feval" commit --round round "$WORK/f1/miners/honest")
key validator; "$BIN/feval" reveals --round "$ROUND" --now 2026-11-30T18:00:00Z >/dev/null
key m1; "$BIN/feval" reveal "$C1" >/dev/null
key m2; "$BIN/feval" reveal "$C2" >/dev/null
key validator
reveal_of() {
  "$BIN/feval" reveals --round "$ROUND" --now 2026-12-01T06:00:00Z --json |
    python3 -c 'import json,sys; print([e["reveal"] for e in json.load(sys.stdin)["entries"] if e["commitment"]==sys.argv[1]][0])' "$1"
}
R1=$(reveal_of "$C1")
R2=$(reveal_of "$C2")
BEACON="$(printf 'bench beacon' | sha256sum | cut -d' ' -f1)"
ev() { "$BIN/feval" evaluate --json --task "$TASK" --beacon "$BEACON" --beacon-source bench:1 --now 2026-12-01T06:00:00Z "$@"; }
V1=$(ev "$R1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["artifact"]["digest"])')
V2=$(ev "$R2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["artifact"]["digest"])')
# ms CMD...: wall time of one run in milliseconds.
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
replay() { "$BIN/feval" replay "$@"; }
# Every timed command must succeed: check once before timing.
for v in "$V1" "$V2"; do replay "$v" >/dev/null; done

out="$WORK/times"
for i in $(seq 0 "$RUNS"); do
  for f in 2 1; do
    r=R$f v=V$f
    if [ $((i % 2)) = 0 ]; then
      a=$(ms ev "${!r}"); b=$(ms ev --full "${!r}"); p=$(ms replay "${!v}")
    else
      p=$(ms replay "${!v}"); b=$(ms ev --full "${!r}"); a=$(ms ev "${!r}")
    fi
    [ "$i" = 0 ] && continue # warm-up round
    echo "$f $a $b $p" >> "$out"
  done
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$out" "$load" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"load average at the end: {sys.argv[2]}")
print("| submission | evaluate (audit) ms | evaluate --full ms | replay of the audit ms | audit / full | replay / full |")
print("|---|---:|---:|---:|---:|---:|")
for f, name in (("2", "format 2 (claims file)"), ("1", "format 3 (rows layer, rows index)")):
    rs = [(int(a), int(b), int(p)) for g, a, b, p in rows if g == f]
    med = lambda xs: statistics.median(xs)
    print(f"| {name} | {med([a for a,_,_ in rs]):.0f} | {med([b for _,b,_ in rs]):.0f} | {med([p for *_,p in rs]):.0f} | "
          f"{med([a/b for a,b,_ in rs]):.3f} | {med([p/b for _,b,p in rs]):.3f} |")
PY
