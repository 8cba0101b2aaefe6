#!/usr/bin/env bash
# The fan-out demo: builds `kcl`, then runs `kcl consume --fan-out` against kinesis-local
# (SubscribeToShard over HTTP/2) and dynalite inside a network namespace of its own
# (kinesis-local listens on every interface): a fleet of two workers reads a 4-shard stream,
# a worker restarted resumes from its checkpoints, two applications read at once. Needs
# `unshare -n` (root, or user namespaces).
#
#   bash scripts/demo-fanout.sh                 # everything
#   KCL_SKIP_DEPS=1 bash scripts/demo-fanout.sh # skip the dependency check
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
if [ "${KCL_SKIP_DEPS:-0}" != "1" ]; then
  bash scripts/install-deps.sh
fi
build_dir="${KCL_BUILD_DIR:-build/release}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCL_WERROR=ON >/dev/null
cmake --build "$build_dir" -j "${KCL_JOBS:-$(nproc)}" --target kcl_cli
exec unshare -n python3 tests/integration/fanout_local/kinesis_local_fanout.py \
  --kcl "$build_dir/tools/kcl/kcl" --node-modules "${KCL_NODE_MODULES:-$here/node_modules}"
