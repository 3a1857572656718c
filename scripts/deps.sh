#!/usr/bin/env bash
# deps.sh: installs the Debian packages statebench builds with, if any is missing.
# Sourced by scripts/run.sh and scripts/test.sh; safe to run again (no-op when all are present).
set -euo pipefail
SB_PACKAGES=(build-essential cmake ninja-build git pkg-config libeigen3-dev libcli11-dev libfmt-dev
             libyaml-cpp-dev libgtest-dev nlohmann-json3-dev zlib1g-dev)
sb_missing=()
for p in "${SB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || sb_missing+=("$p")
done
if [ ${#sb_missing[@]} -gt 0 ]; then
  echo "statebench: installing ${sb_missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${sb_missing[@]}" >/dev/null
fi
