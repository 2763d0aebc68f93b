#!/usr/bin/env bash
# Set up a virtualenv and run `trawl demo`: a crawl of the built-in sandbox web.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TRAWL_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[redisbloom]"
exec "$VENV/bin/trawl" demo "$@"
