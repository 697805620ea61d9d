#!/usr/bin/env bash
# Install the pinned codex binary (.ci/codex-version) from the npm registry into .codex-bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(cat .ci/codex-version)
bin=.codex-bin/node_modules/.bin/codex
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qF "$version"; then
  "$bin" --version; exit 0
fi
command -v npm >/dev/null || { echo "npm not found" >&2; exit 1; }
npm install --silent --no-audit --no-fund --save-exact --prefix .codex-bin "@openai/codex@${version}" >/dev/null
"$bin" --version
