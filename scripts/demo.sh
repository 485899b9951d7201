#!/usr/bin/env bash
# feval's main job end to end, printing each step: a task owner opens a round of
# the rollout-audit competition; two miners commit and reveal 10,000 rollout rows
# each (one honest, one inflating 10 % of its rewards); a validator audits 320
# rows chosen by a beacon and signs verdicts; an auditor with a fresh store
# replays them and gets the identical verdict; altered verdicts are caught.
#
# Everyone's store is an embedded local store; a throw-away registry on
# 127.0.0.1 stands in for the shared registry. The validator's clock is given
# explicitly (--now) so the commit and reveal windows pass in seconds.
source "$(dirname "$0")/demo-lib.sh"

step "start a throw-away OCI registry on 127.0.0.1"
start_registry competition/rollouts

step "generate the reference task (5,000 math + 5,000 instruction-following) and the miners' rows"
"$BIN/genrollouts" -out "$WORK/fixtures"

for role in owner honest inflated validator auditor rogue; do
  as "$role" >/dev/null
  "$BIN/feval" init >/dev/null
  "$BIN/feval" key generate >/dev/null
done

step "task owner: sign the task and open a round (commits close 2026-12-01, reveals close 2026-12-02)"
open_round rollouts "$WORK/fixtures/task"

step "miners: commit (one line to publish; the submission and salt stay private)"
commit_as honest "$WORK/fixtures/miners/honest"
commit_as inflated "$WORK/fixtures/miners/inflated-10"

step "validator: observe the round before commits close"
as validator
show reveals --round "$ROUND" --from "$REPO" --now 2026-11-30T18:00:00Z

step "miners: reveal after commits close"
reveal_phase
for m in honest inflated; do
  as "$m"
  var="COMMIT_$m"
  show reveal --to "$REPO" "${!var}"
done

step "validator: every reveal with its status"
as validator
show reveals --round "$ROUND" --from "$REPO" --now 2026-12-01T06:00:00Z
REVEAL_honest=$("$BIN/feval" reveals --round "$ROUND" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print([e["reveal"] for e in r["entries"] if e["commitment"]==sys.argv[1]][0])' "$COMMIT_honest")
REVEAL_inflated=$("$BIN/feval" reveals --round "$ROUND" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print([e["reveal"] for e in r["entries"] if e["commitment"]==sys.argv[1]][0])' "$COMMIT_inflated")

BEACON="$(printf 'simulated drand round 4242' | sha256sum | cut -d' ' -f1)"
step "anyone: the 320 rows a beacon published after commits closed selects (first 5 shown)"
show sample --beacon "$BEACON" --beacon-source drand:simulated:4242 "$REVEAL_honest" | head -9 || true

step "validator: evaluate both reveals and push the signed verdicts"
V_HONEST=$("$BIN/feval" evaluate --json --task "$TASK" --beacon "$BEACON" --beacon-source drand:simulated:4242 --now 2026-12-01T06:00:00Z --to "$REPO" "$REVEAL_honest" | python3 -c 'import json,sys; print(json.load(sys.stdin)["artifact"]["digest"])')
show inspect "$V_HONEST" | head -4 || true # head closes the pipe early
set +e
show evaluate --task "$TASK" --beacon "$BEACON" --beacon-source drand:simulated:4242 --now 2026-12-01T06:00:00Z --to "$REPO" "$REVEAL_inflated" | head -12 || true
set -e
V_INFLATED=$("$BIN/feval" ls --json --kind verdict | python3 -c 'import json,sys; print([e["digest"] for e in json.load(sys.stdin) if e["digest"]!=sys.argv[1]][0])' "$V_HONEST")

step "auditor: replay both verdicts from the registry in a fresh store"
as auditor
show replay --from "$REPO" --pub "$WORK/validator/key.pub" "$V_HONEST"
show replay --from "$REPO" --pub "$WORK/validator/key.pub" "$V_INFLATED"

step "tamper 1: edit a recorded reward in the auditor's copy of the verdict: its signature no longer covers it"
LAYER=$(python3 - "$FEVAL_STORE" "$V_INFLATED" <<'PY'
import json, sys
m = json.load(open(f"{sys.argv[1]}/blobs/sha256/{sys.argv[2].split(':')[1]}"))
print(m["layers"][0]["digest"].split(":")[1])
PY
)
cp "$FEVAL_STORE/blobs/sha256/$LAYER" "$WORK/record.bak"
sed -i 's/"recomputed":"0"/"recomputed":"1"/' "$FEVAL_STORE/blobs/sha256/$LAYER"
set +e
show replay --pub "$WORK/validator/key.pub" "$V_INFLATED"; echo "(exit $?: verification failed)"
set -e
cp "$WORK/record.bak" "$FEVAL_STORE/blobs/sha256/$LAYER"

step "tamper 2: a rogue validator re-signs the rejected verdict as passed"
as rogue
"$BIN/feval" pull --tag v "$REPO@$V_INFLATED" >/dev/null
"$BIN/feval" inspect --record v | sed -e 's/"reason":"reward_mismatch",//' -e 's/"status":"rejected"/"status":"passed"/' > "$WORK/forged.json"
SUBJ=$("$BIN/feval" inspect --json v | python3 -c 'import json,sys; print(json.load(sys.stdin)["subject"]["digest"])')
FORGED=$(show record --kind verdict --subject "$SUBJ" "$WORK/forged.json")
echo "$FORGED"
show push "$FORGED" "$REPO:forged"
as auditor
set +e
show replay --from "$REPO" --pub "$WORK/validator/key.pub" "$FORGED"; echo "(exit $?: not signed by the trusted validator)"
show replay --pub "$WORK/rogue/key.pub" "$FORGED"; echo "(exit $?: trusting the rogue's key: signed, but the regenerated verdict differs)"
set -e

step "everyone: keep the round, its verdicts and a consensus record in bin/demo for 'feval serve'"
as validator >/dev/null
FP_VALIDATOR=$("$BIN/feval" key show | sed -n 's/^fingerprint //p')
KEEP="$BIN/demo"
rm -rf "$KEEP"
mkdir -p "$KEEP"
cp "$WORK/validator/key.pub" "$KEEP/validator.pub"
printf '{"stakes":{"%s":1}}\n' "$FP_VALIDATOR" > "$KEEP/stakes.json"
export FEVAL_STORE="$KEEP/store" FEVAL_KEY="$KEEP/viewer.key"
"$BIN/feval" init >/dev/null
"$BIN/feval" key generate >/dev/null
show consensus --round "$ROUND" --from "$REPO" --stakes "$KEEP/stakes.json" --pub "$KEEP/validator.pub" | head -8 || true
echo "browse it: bin/feval serve --store bin/demo/store --pub bin/demo/validator.pub --pub bin/demo/viewer.pub   (then open the printed URL)"

step "done: honest verdict replayed identical; inflated rows rejected; forgeries caught"
