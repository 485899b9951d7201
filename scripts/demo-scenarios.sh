#!/usr/bin/env bash
# The scenarios competition end to end, printing each step: a task owner opens a
# round of the reference scenarios task (a subset of its twenty scenarios, to
# keep the demo short) and keeps its hidden tests private until reveals close;
# three miners commit and reveal packs of the three
# forms (a declarative policy.json, a policy.py with session state, a raw
# server); two validators evaluate every reveal: per scenario the reference
# harness works in the sandbox through the pack's policy sidecar and the meter
# (to the fixture upstream, which stands in for the eight model APIs), then the
# hidden tests run in a fresh verifier sandbox; consensus over the two
# validators' signed verdicts picks the seat, which takes the whole weight; an
# auditor in a fresh store replays a verdict (meter in replay mode, no model
# called): identical, and again re-running only the verifiers.
source "$(dirname "$0")/demo-lib.sh"

step "start a throw-away OCI registry and the fixture model upstream on 127.0.0.1"
start_registry competition/scenarios

SCENARIOS="01-parse-range 03-failing-suite 08-roman 16-normpath"
"$BIN/genscentask" "$WORK/task" "$WORK/hidden" "$WORK/scripts.json" $SCENARIOS
UPORT=$(free_port)
"$BIN/fixture-upstream" -listen "127.0.0.1:$UPORT" -scripts "$WORK/scripts.json" >"$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$UPORT/v1/models"
export FEVAL_METER_UPSTREAM="http://127.0.0.1:$UPORT/v1"
echo "fixture upstream (eight deterministic stand-in models): $FEVAL_METER_UPSTREAM"
echo "scenarios: $SCENARIOS"

MINERS="json py server"
declare -A PACK=([json]=strong [py]=py-session [server]=server)
for role in owner $MINERS val1 val2 auditor; do
  as "$role" >/dev/null
  "$BIN/feval" init >/dev/null
  "$BIN/feval" key generate >/dev/null
done

step "task owner: sign the task (harness, verifier and the hidden tests' tree pinned by digest; the tests stay private) and open a round"
open_round scenarios "$WORK/task"

step "miners: commit packs of three forms (policy.json, policy.py, server); the static gate runs first"
for m in $MINERS; do commit_as "$m" "fixtures/policies/${PACK[$m]}/pack"; done

step "validators: observe the round before commits close"
for v in val1 val2; do
  as "$v"
  show reveals --round "$ROUND" --from "$REPO" --now 2026-11-30T18:00:00Z >/dev/null
done

step "miners: reveal after commits close"
reveal_phase
for m in $MINERS; do
  as "$m"
  var="COMMIT_$m"
  show reveal --to "$REPO" "${!var}"
done

step "task owner: reveals have closed; publish the hidden tests the task pins"
as owner
show pack --kind tests --tag hidden "$WORK/hidden"
show push hidden "$REPO:hidden"

step "validators: run every pack on the scenarios (harness -> policy sidecar -> meter; hidden tests in a fresh verifier) and push signed verdicts"
for v in val1 val2; do
  as "$v"
  show reveals --round "$ROUND" --from "$REPO" --now 2026-12-01T06:00:00Z >/dev/null
  "$BIN/feval" pull --tag hidden "$REPO:hidden" >/dev/null
  for m in $MINERS; do
    var="COMMIT_$m"
    rv=$("$BIN/feval" reveals --round "$ROUND" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print([e["reveal"] for e in r["entries"] if e["commitment"]==sys.argv[1]][0])' "${!var}")
    out=$(show evaluate --task "$TASK" --hidden hidden --now 2026-12-01T06:00:00Z --to "$REPO" "$rv")
    if [ "$v" = val1 ]; then echo "$out"; else echo "$out" | head -4; fi
    eval "V_${v}_$m=$(echo "$out" | awk '$1=="verdict"{print $2}')"
  done
done

step "anyone: consensus over both validators' signed verdicts picks the seat; under the scenarios rule the seat holder takes the weight"
as auditor
FP1=$(FEVAL_KEY="$WORK/val1/key.key" "$BIN/feval" key show --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["fingerprint"])')
FP2=$(FEVAL_KEY="$WORK/val2/key.key" "$BIN/feval" key show --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["fingerprint"])')
printf '{"stakes": {"%s": 100, "%s": 60}}\n' "$FP1" "$FP2" > "$WORK/stakes.json"
show consensus --round "$ROUND" --from "$REPO" --stakes "$WORK/stakes.json"

step "auditor: replay the policy.py pack's verdict in a fresh store (harness, policy and verifier re-run; the meter answers from the trace)"
show replay --from "$REPO" --pub "$WORK/val1/key.pub" "$V_val1_py"
step "auditor: and re-run only the verifiers on the recorded final workspaces"
show replay --verify-only --pub "$WORK/val1/key.pub" "$V_val1_py"

step "done: three packs scored by two validators, the seat decided, a verdict replayed identical"
