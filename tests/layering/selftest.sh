#!/usr/bin/env bash
# The layering check must find a planted violation: a copy of the tree's layer declarations
# with one aws file that includes a worker header, and one public header that includes an
# internal one and defines a macro, and one test that includes another test area's header.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/aws" "$tmp/src/worker" "$tmp/include/kcl"
cp "$1/src/CMakeLists.txt" "$tmp/src/CMakeLists.txt"
for area in $(sed -n 's/^ *kcl_area( *\([a-z_]*\).*/\1/p' "$1/src/CMakeLists.txt"); do
  mkdir -p "$tmp/src/$area"
done
printf '#include "worker/worker_access.h"\n' > "$tmp/src/aws/planted.cpp"
printf '#include "aws/retry.h"\n#define KCL_PLANTED 1\n' > "$tmp/include/kcl/planted.h"
mkdir -p "$tmp/tests/integration/fanout"
printf '#include "integration/worker/worker_test_support.h"\n' > "$tmp/tests/integration/fanout/planted_test.cpp"
out="$(python3 "$here/layering_check.py" "$tmp" || true)"
echo "$out"
grep -q 'src/aws/planted.cpp: includes "worker/worker_access.h" from layer worker' <<<"$out"
grep -q 'include/kcl/planted.h: public header includes internal "aws/retry.h"' <<<"$out"
grep -q 'include/kcl/planted.h: public header defines the macro KCL_PLANTED' <<<"$out"
grep -q 'tests/integration/fanout/planted_test.cpp: includes "integration/worker/worker_test_support.h" from another test area' <<<"$out"
grep -q '4 violations' <<<"$out"
echo "layering selftest: all four planted violations found"
