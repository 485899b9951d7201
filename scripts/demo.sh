#!/usr/bin/env bash
# feval's main job end to end on the embedded local store, step by step.
# Uses a throw-away workspace, key and loopback registry; leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/bin"
FEVAL="$BIN/feval"
WORK=$(mktemp -d)
REG_PID=""
cleanup() {
  local rc=$?
  if [ -n "$REG_PID" ]; then kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

export FEVAL_STORE="$WORK/miner-store"
export FEVAL_KEY="$WORK/keys/miner.key"
export FEVAL_PASSWORD="demo-password"

step "start a throw-away OCI registry on 127.0.0.1"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$WORK/registry.yml" <<YML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $WORK/registry}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$PORT}
YML
OTEL_TRACES_EXPORTER=none "$BIN/registry" serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
REG_PID=$!
for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$PORT/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
echo "registry at 127.0.0.1:$PORT"

step "miner: create a store and a signing key"
run "$FEVAL" init
run "$FEVAL" key generate

step "miner: pack and sign the fixture submission"
DIGEST=$("$FEVAL" pack --kind submission --tag demo fixtures/demo/submission)
echo "$DIGEST"
run "$FEVAL" inspect demo

step "miner: verify it locally"
run "$FEVAL" verify "$DIGEST"

step "miner: push it with its signature to the registry"
run "$FEVAL" push "$DIGEST" "127.0.0.1:$PORT/feval/demo:submission"

step "validator: pull it into a second store and verify it there"
export FEVAL_STORE="$WORK/validator-store"
run "$FEVAL" init
run "$FEVAL" pull "127.0.0.1:$PORT/feval/demo:submission"
run "$FEVAL" verify --pub "$WORK/keys/miner.pub" "$DIGEST"
run "$FEVAL" fsck

step "done: the validator holds the identical, signed submission $DIGEST"
