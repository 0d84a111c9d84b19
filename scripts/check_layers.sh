#!/usr/bin/env bash
# check_layers.sh — the node agent's directories depend in one direction:
#   src/ops  <-  src/tier  <-  src/replication  <-  src/agent
# (docs/architecture.md, "The layers"). A file that includes a header from a
# layer above its own is named, with the line, and the check fails.
#   scripts/check_layers.sh [repo root]      (ctest: AgentLayersDependOneWay)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
status=0
check() {  # check <dir> <forbidden dir>...
  local dir=$1; shift
  for above in "$@"; do
    if hits=$(grep -n "#include \"$above/" "src/$dir"/*.h "src/$dir"/*.cc 2>/dev/null); then
      while IFS= read -r hit; do
        echo "layer violation: ${hit%%:*} (src/$dir) includes a header of src/$above, a layer above it:" \
             "${hit#*:}; move the shared part down or pass it in" >&2
      done <<<"$hits"
      status=1
    fi
  done
}
check ops tier replication agent
check tier replication agent
check replication agent
[ $status -eq 0 ] && echo "agent layers: ops <- tier <- replication <- agent, no include against the direction"
exit $status
