#!/usr/bin/env bash
# Set up a virtualenv with the test dependencies and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TRAWL_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[test]"
"$VENV/bin/ruff" check .
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=25 "$@"
