# Shared by the demo scripts (sourced, not run): a throw-away work directory
# removed on exit with every background process the demo started, the step and
# role helpers, and the throw-away registry and fixture upstream.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/bin"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
show() { printf '$ feval %s\n' "$*" >&2; "$BIN/feval" "$@"; }
as() { # as ROLE: use ROLE's store and key
  export FEVAL_STORE="$WORK/$1/store" FEVAL_KEY="$WORK/$1/key.key"
  printf -- '-- as %s\n' "$1"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 100); do curl -fsS "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
export FEVAL_PASSWORD="demo-password"

# start_registry NAME: the reference registry on a free loopback port; sets
# REPO to the repository NAME in it.
start_registry() {
  local port
  port=$(free_port)
  cat > "$WORK/registry.yml" <<YML
version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: $WORK/registry}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$port}
YML
  OTEL_TRACES_EXPORTER=none "$BIN/registry" serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$port/v2/"
  REPO="127.0.0.1:$port/$1"
  echo "registry repository: $REPO"
}

# open_round PROTOCOL TASKDIR: as the task owner, sign the task in TASKDIR,
# open a round (commits close 2026-12-01, reveals 2026-12-02) and push it to
# $REPO; sets TASK and ROUND.
open_round() {
  # The demo's clock, which 'round open', 'commit' and 'reveal' check the
  # windows against: before commits close (reveal_phase moves it on).
  export FEVAL_NOW=2026-11-30T12:00:00Z
  as owner
  TASK=$(show task create --protocol "$1" --tag task "$2")
  echo "$TASK"
  ROUND=$(show round open --task task --commit-until 2026-12-01T00:00:00Z --reveal-until 2026-12-02T00:00:00Z --tag round)
  echo "$ROUND"
  show push round "$REPO:round"
}

# reveal_phase: the demo's clock after commits close, before reveals close.
reveal_phase() { export FEVAL_NOW=2026-12-01T01:00:00Z; }

# commit_as MINER DIR: MINER fetches the round and commits DIR to it; sets
# COMMIT_<MINER> to the commitment.
commit_as() {
  local c
  as "$1"
  "$BIN/feval" pull --tag round "$REPO:round" >/dev/null
  c=$(show commit --round round --to "$REPO" "$2")
  echo "$c"
  eval "COMMIT_$1=$c"
}
