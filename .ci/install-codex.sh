#!/usr/bin/env bash
# Install the pinned codex binary from the npm registry into .codex-bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(cat .ci/codex-version 2>/dev/null || echo "latest")
if [ -x .codex-bin/node_modules/.bin/codex ]; then exit 0; fi
command -v npm >/dev/null || { echo "npm not found" >&2; exit 1; }
npm install --silent --no-audit --no-fund --prefix .codex-bin "@openai/codex@${version}" >/dev/null
.codex-bin/node_modules/.bin/codex --version
