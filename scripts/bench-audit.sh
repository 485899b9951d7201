#!/usr/bin/env bash
# An audit against a full evaluation as whole processes, on the reference task
# (10,000 rows):
#
#  - a round of BENCH_MINERS (default 8) generated honest miners in submission
#    format 3, the default (distinct miner seeds), evaluated in one process
#    (`feval evaluate --round`) as audits and with --full, and the audit
#    verdicts replayed in one process (`feval replay V1 ... VN`);
#  - a single reveal, as before: an honest miner in format 2 (claims file) and
#    one in format 3 (rows layer and rows index: what `feval commit` makes of
#    a plain rows directory) in another round, `feval evaluate REVEAL`,
#    `feval evaluate --full REVEAL` and `feval replay` of the audit verdict.
#
# The commands of each case are timed alternately in the same loop (order
# swapped every round), so load from elsewhere falls on all of them, and the
# medians of the per-round ratios are printed. BENCH_RUNS sets the rounds
# (default 7). Uses bin/feval and bin/genrollouts (make build).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/bin"
RUNS="${BENCH_RUNS:-7}"
MINERS="${BENCH_MINERS:-8}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export FEVAL_PASSWORD="bench-password" FEVAL_STORE="$WORK/store"
key() { export FEVAL_KEY="$WORK/$1.key"; }

"$BIN/genrollouts" -out "$WORK/f2" -claims 2>/dev/null
"$BIN/genrollouts" -out "$WORK/f1" 2>/dev/null
for i in $(seq 1 "$MINERS"); do
  "$BIN/genrollouts" -out "$WORK/n$i" -miner-seed "bench miner $i" 2>/dev/null
  cmp -s "$WORK/n$i/task/tasks.jsonl" "$WORK/f2/task/tasks.jsonl" || { echo "genrollouts: the task differs between runs" >&2; exit 1; }
done
"$BIN/feval" init >/dev/null
key owner; "$BIN/feval" key generate >/dev/null
key validator; "$BIN/feval" key generate >/dev/null

key owner
TASK=$("$BIN/feval" task create --protocol rollouts --tag task "$WORK/f2/task")
# Two rounds (their reveal windows differ, so they are two records). The
# clock the window checks read: before commits close, then after.
export FEVAL_NOW=2026-11-30T12:00:00Z
open_round() { "$BIN/feval" round open --task task --commit-until 2026-12-01T00:00:00Z --reveal-until "$2" --tag "$1"; }
ROUND=$(open_round round 2026-12-02T00:00:00Z)
ROUNDN=$(open_round round-n 2026-12-02T01:00:00Z)
# commit NAME ROUND DIR: a miner with its own key commits DIR; prints the commitment.
commit() { key "$1"; "$BIN/feval" key generate >/dev/null; "$BIN/feval" commit --round "$2" "$3"; }
C1=$(commit m1 round "$WORK/f2/miners/honest")
C2=$(commit m2 round "$WORK/f1/miners/honest")
CN=()
for i in $(seq 1 "$MINERS"); do CN+=("$(commit "n$i" round-n "$WORK/n$i/miners/honest")"); done
key validator
for r in "$ROUND" "$ROUNDN"; do "$BIN/feval" reveals --round "$r" --now 2026-11-30T18:00:00Z >/dev/null; done
export FEVAL_NOW=2026-12-01T00:30:00Z
key m1; "$BIN/feval" reveal "$C1" >/dev/null
key m2; "$BIN/feval" reveal "$C2" >/dev/null
for i in $(seq 1 "$MINERS"); do key "n$i"; "$BIN/feval" reveal "${CN[$((i - 1))]}" >/dev/null; done
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
# The round's audit verdicts, all passed (else evaluate exits non-zero).
mapfile -t VN < <(ev --round round-n | python3 -c '
import json, sys
b = json.load(sys.stdin)
assert b["passed"] == len(b["results"]), b
for r in b["results"]: print(r["result"]["artifact"]["digest"])')
[ "${#VN[@]}" = "$MINERS" ] || { echo "the round has ${#VN[@]} reveals, want $MINERS" >&2; exit 1; }
# ms CMD...: wall time of one run in milliseconds.
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
replay() { "$BIN/feval" replay "$@"; }
# Every timed command must succeed: check once before timing.
for v in "$V1" "$V2"; do replay "$v" >/dev/null; done
replay "${VN[@]}" >/dev/null

out="$WORK/times"
for i in $(seq 0 "$RUNS"); do
  for f in n 2 1; do
    if [ "$f" = n ]; then
      audit=(ev --round round-n) full=(ev --full --round round-n) rep=(replay "${VN[@]}")
    else
      r=R$f v=V$f
      audit=(ev "${!r}") full=(ev --full "${!r}") rep=(replay "${!v}")
    fi
    if [ $((i % 2)) = 0 ]; then
      a=$(ms "${audit[@]}"); b=$(ms "${full[@]}"); p=$(ms "${rep[@]}")
    else
      p=$(ms "${rep[@]}"); b=$(ms "${full[@]}"); a=$(ms "${audit[@]}")
    fi
    [ "$i" = 0 ] && continue # warm-up round
    echo "$f $a $b $p" >> "$out"
  done
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$out" "$load" "$MINERS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"load average at the end: {sys.argv[2]}")
print("| case | evaluate (audit) ms | evaluate --full ms | replay of the audit ms | audit / full | replay / full |")
print("|---|---:|---:|---:|---:|---:|")
cases = (("n", f"round of {sys.argv[3]} miners, one process (format 3)"),
         ("2", "one reveal, format 2 (claims file)"), ("1", "one reveal, format 3 (rows layer, rows index)"))
for f, name in cases:
    rs = [(int(a), int(b), int(p)) for g, a, b, p in rows if g == f]
    med = statistics.median
    print(f"| {name} | {med([a for a,_,_ in rs]):.0f} | {med([b for _,b,_ in rs]):.0f} | {med([p for *_,p in rs]):.0f} | "
          f"{med([a/b for a,b,_ in rs]):.3f} | {med([p/b for _,b,p in rs]):.3f} |")
PY
