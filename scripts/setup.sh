#!/usr/bin/env bash
# Installs the Debian 12 packages tensorfold builds and tests with (run as root or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS="build-essential cmake ninja-build pkg-config git clang clang-format clang-tidy libclang-rt-14-dev \
  libgtest-dev libgmock-dev nlohmann-json3-dev libcpp-httplib-dev libssl-dev \
  libpcre2-dev libutf8proc-dev libpng-dev libturbojpeg0-dev libjpeg62-turbo-dev libwebp-dev zlib1g-dev xz-utils \
  libpoppler-cpp-dev fonts-dejavu-core python3 python3-yaml"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
# Node.js may come from NodeSource (with npm inside), whose nodejs conflicts with Debian's npm:
# install Debian's only when there is no npm at all.
command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
if [ -n "$missing" ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
bash "$(dirname "${BASH_SOURCE[0]}")/fetch_test_data.sh"
bash "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/setup.sh"
