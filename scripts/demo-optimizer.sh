#!/usr/bin/env bash
# The optimizer competition end to end, printing each step: a task owner opens
# a round of the reference optimizer task (a byte-level MLP language model on
# Debian's torch); three miners commit and reveal optimizers (a tuned AdamW
# schedule, the baseline SGD with momentum, and one that diverges); a validator
# trains each in the sandbox, signs the checkpoints and the verdicts; the tuned
# one clears the bar and is confirmed by a second run; both runs' seeds and the
# held-out windows come from a beacon published after commits closed;
# 'feval frontier' and 'feval emission' read the signed verdicts; an
# auditor in a fresh store replays the confirmed verdict: identical.
source "$(dirname "$0")/demo-lib.sh"

step "start a throw-away OCI registry on 127.0.0.1"
start_registry competition/optimizer

step "generate the reference optimizer task (model, training loop, held-out evaluator, training data, held-out pool, horizon, budget)"
"$BIN/genoptask" "$WORK/task"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); print("horizon", t["training"]["horizon_steps"], "steps; budget", t["training"]["budget_cpu_millis"], "CPU ms; held-out pool", t["data"]["held_out_pool_bytes"], "bytes, of which each round evaluates", t["data"]["held_out_windows"], "windows; baseline", t["baseline_micro_nats"], "micro-nats")' "$WORK/task/task.json"

MINERS="tuned sgd diverge"
declare -A SRC=([tuned]=ref-tuned [sgd]=ref-sgd-momentum [diverge]=ref-diverge)
for role in owner $MINERS validator auditor; do
  as "$role" >/dev/null
  "$BIN/feval" init >/dev/null
  "$BIN/feval" key generate >/dev/null
done
for m in $MINERS; do
  mkdir -p "$WORK/sub-$m"
  cp "fixtures/optimizer/${SRC[$m]}/optimizer.py" "$WORK/sub-$m/"
done

step "task owner: sign the task and open a round (commits close 2026-12-01, reveals close 2026-12-02)"
open_round optimizer "$WORK/task"

step "miners: commit (the static gate runs first; only the hash is published)"
for m in $MINERS; do commit_as "$m" "$WORK/sub-$m"; done

step "validator: observe the round before commits close"
as validator
show reveals --round "$ROUND" --from "$REPO" --now 2026-11-30T18:00:00Z >/dev/null

step "miners: reveal after commits close"
reveal_phase
for m in $MINERS; do
  as "$m"
  var="COMMIT_$m"
  show reveal --to "$REPO" "${!var}"
done

# The seeds and the held-out windows come from the round's beacon, published
# after commits closed: a drand round in production (--drand-round,
# --drand-signature); here a plain one, recorded as unverified (one of the
# beacons the task's baseline was calibrated on).
BEACON=(--beacon 1 --beacon-source calibration)
step "validator: train each optimizer in the sandbox (seeds and held-out windows from the round's beacon), sign checkpoints and verdicts, push them"
as validator
show reveals --round "$ROUND" --from "$REPO" --now 2026-12-01T06:00:00Z
for m in $MINERS; do
  var="COMMIT_$m"
  rv=$("$BIN/feval" reveals --round "$ROUND" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print([e["reveal"] for e in r["entries"] if e["commitment"]==sys.argv[1]][0])' "${!var}")
  set +e
  show evaluate --task "$TASK" --now 2026-12-01T06:00:00Z "${BEACON[@]}" --to "$REPO" "$rv"
  rc=$?
  set -e
  [ "$m" = diverge ] && echo "(exit $rc: rejected)"
done
V_TUNED=$("$BIN/feval" ls --json --kind verdict | python3 -c '
import json, subprocess, sys
for e in json.load(sys.stdin):
    rec = json.loads(subprocess.run([sys.argv[1], "inspect", "--record", e["digest"]], capture_output=True, text=True).stdout)
    if rec.get("outcome") == "confirmed":
        print(e["digest"])' "$BIN/feval")

step "anyone: the frontier and the emission, from the validator's signed verdicts in the registry"
as auditor
show frontier --round "$ROUND" --from "$REPO" --pub "$WORK/validator/key.pub"
show emission --round "$ROUND" --from "$REPO" --pub "$WORK/validator/key.pub" --at 14d

step "auditor: replay the confirmed verdict in a fresh store (held-out loss recomputed from the signed checkpoints)"
show replay --from "$REPO" --pub "$WORK/validator/key.pub" "$V_TUNED"

step "auditor: retrain both runs for their recorded steps and compare the checkpoints bit for bit"
show replay --retrain --pub "$WORK/validator/key.pub" "$V_TUNED"

step "done: one optimizer confirmed and moved the frontier; its verdict replays identical"
