#!/usr/bin/env bash
# Installs the e2e test client (openai@6, pinned by package-lock.json) into tests/e2e/node_modules.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
command -v npm >/dev/null || { echo "tests/e2e/setup.sh: npm not found (scripts/setup.sh installs it)" >&2; exit 1; }
if [ -f node_modules/openai/package.json ] && grep -q '"version": "6.49.0"' node_modules/openai/package.json; then
  echo "tests/e2e: openai@6.49.0 already installed"
  exit 0
fi
npm ci --no-audit --no-fund --ignore-scripts
