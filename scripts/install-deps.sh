#!/usr/bin/env bash
# Installs everything kcl-cpp needs on Debian 12: apt packages for the build and the
# emulators' npm packages (versions pinned in package-lock.json). Idempotent: a second
# run checks and returns quickly.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

apt_packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libcurl4-openssl-dev libssl-dev libnghttp2-dev zlib1g-dev openssl
  libsimdjson-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libcpp-httplib-dev libisal-dev
  clang-format procps iproute2 util-linux
  # independent checkers used by the tests: the Prometheus text parser, a real browser
  python3 python3-prometheus-client chromium
  # Prometheus and promtool: the alert rules (docs/prometheus) are checked and fired in tests
  prometheus
  # the kcl Python package (python/): bindings, headers, its pytest suite, and what pip,
  # venvs and `python3 -m build` need to install it offline
  pybind11-dev python3-dev python3-pytest python3-mypy python3-venv python3-pip python3-build
)
# Node.js and npm run the emulators; any installed node >= 14 will do (some images ship a
# node build that bundles npm, which conflicts with Debian's npm package).
command -v node >/dev/null 2>&1 || apt_packages+=(nodejs)
command -v npm >/dev/null 2>&1 || apt_packages+=(npm)

missing=()
for p in "${apt_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  echo "install-deps: apt-get install ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Emulators (kinesalite, dynalite, kinesis-local) and the checkers written elsewhere
# (aws-kcl's Node child side, aws-kinesis-agg's KPL format) and the producer benchmark's
# peer (the AWS SDK for JavaScript's Kinesis client) and the consume benchmark's
# (lifion-kinesis), pinned by package-lock.json.
if [ ! -d "$here/node_modules/kinesalite" ] || [ ! -d "$here/node_modules/dynalite" ] \
   || [ ! -d "$here/node_modules/kinesis-local" ] || [ ! -d "$here/node_modules/aws-kcl" ] \
   || [ ! -d "$here/node_modules/aws-kinesis-agg" ] \
   || [ ! -d "$here/node_modules/@aws-sdk/client-kinesis" ] \
   || [ ! -d "$here/node_modules/lifion-kinesis" ] \
   || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
  echo "install-deps: npm ci"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "install-deps: ok"
