#!/usr/bin/env bash
# Runs every fuzz target of the repository for FUZZTIME each (default 10s).
# The seed corpora also run as ordinary tests in 'make test'.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
git grep -l '^func Fuzz' -- '*_test.go' | while read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | cut -d' ' -f2); do
    echo "== $pkg $target ($FUZZTIME)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
  done
done
