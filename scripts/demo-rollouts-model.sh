#!/usr/bin/env bash
# A rollouts round that binds every row to the committed model, printing each
# step: a task owner opens a round of a model-bound task (400 rows, each
# item's prompt as token ids); three miners pack the same tiny Qwen3 model and
# generate their rows with 'feval rollouts generate' (the sampling randomness
# of every position derives from the round, the task id and the miner's key):
# one honest, one who replaces 5 % of its math completions by correct answers
# written elsewhere, one who generated with slightly perturbed weights but
# commits the original; a validator audits 320 rows chosen by a beacon with
# one teacher-forced pass of the committed model per row; an auditor replays
# the verdicts: identical.
source "$(dirname "$0")/demo-lib.sh"

step "start a throw-away OCI registry on 127.0.0.1"
start_registry competition/rollouts-model

step "generate a model-bound task (200 math + 200 instruction-following items), the tiny Qwen3 model and a perturbed copy"
"$BIN/genmodelround" task -out "$WORK/fx"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; print("model section:", json.dumps(m, sort_keys=True))' "$WORK/fx/task/task.json"

MINERS="honest swapper perturbed"
for role in owner $MINERS validator auditor; do
  as "$role" >/dev/null
  "$BIN/feval" init >/dev/null
  "$BIN/feval" key generate >/dev/null
done

step "task owner: sign the task and open a round (commits close 2026-12-01, reveals close 2026-12-02)"
open_round rollouts "$WORK/fx/task"

step "miners: pack the model and generate every row with the seeded sampler"
for m in $MINERS; do
  as "$m"
  "$BIN/feval" pull --tag round "$REPO:round" >/dev/null
  MODEL=$(show pack --model --kind model --tag model "$WORK/fx/model")
  gen_model=model
  if [ "$m" = perturbed ]; then
    show pack --model --kind model --tag perturbed "$WORK/fx/perturbed"
    gen_model=perturbed
  fi
  show rollouts generate --round round --model "$gen_model" "$WORK/sub-$m"
done
echo "one honest row: $(head -c 300 "$WORK/sub-honest/rows.jsonl")..."

step "swapper: replace 5 % of the math completions by correct answers written elsewhere; perturbed: name the original model"
"$BIN/genmodelround" swap -task "$WORK/fx/task" -model "$WORK/fx/model" "$WORK/sub-swapper"
python3 - "$WORK/sub-perturbed/submission.json" "$MODEL" <<'PY'
import json, sys
p, model = sys.argv[1], sys.argv[2]
s = json.load(open(p))
s["model_revision"] = model
open(p, "w").write(json.dumps(s) + "\n")
PY

step "miners: commit (feval commit checks the model first)"
for m in $MINERS; do commit_as "$m" "$WORK/sub-$m"; done

step "validator: observe the round before commits close"
as validator
show reveals --round "$ROUND" --from "$REPO" --now 2026-11-30T18:00:00Z >/dev/null

step "miners: reveal after commits close (the model travels with the submission)"
reveal_phase
for m in $MINERS; do
  as "$m"
  var="COMMIT_$m"
  show reveal --to "$REPO" "${!var}" >/dev/null
done

step "validator: audit 320 rows of each reveal (the model check, then one teacher-forced pass per row)"
as validator
show reveals --round "$ROUND" --from "$REPO" --now 2026-12-01T06:00:00Z
BEACON="$(printf 'simulated drand round 4343' | sha256sum | cut -d' ' -f1)"
VERDICTS=""
for m in $MINERS; do
  var="COMMIT_$m"
  R=$("$BIN/feval" reveals --round "$ROUND" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print([e["reveal"] for e in r["entries"] if e["commitment"]==sys.argv[1]][0])' "${!var}")
  echo "-- $m"
  set +e
  show evaluate --task "$TASK" --beacon "$BEACON" --beacon-source drand:simulated:4343 --now 2026-12-01T06:00:00Z --to "$REPO" "$R" > "$WORK/eval-$m.txt"
  rc=$?
  set -e
  grep -E '^(verdict|status|model|audited rows|provenance)' "$WORK/eval-$m.txt" | head -6
  echo "(exit $rc)"
  VERDICTS="$VERDICTS $(sed -n 's/^verdict  *//p' "$WORK/eval-$m.txt")"
done
grep -q '^status  *passed' "$WORK/eval-honest.txt"
grep -q '^status  *rejected provenance_mismatch' "$WORK/eval-swapper.txt"
grep -q '^status  *rejected provenance_mismatch' "$WORK/eval-perturbed.txt"

step "auditor: replay the three verdicts from the registry in a fresh store"
as auditor
for v in $VERDICTS; do
  show replay --from "$REPO" --pub "$WORK/validator/key.pub" "$v"
done

step "done: the honest rows passed; swapped completions and a different model were rejected at the first failing token; every verdict replayed identical"
