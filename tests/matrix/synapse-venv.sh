#!/usr/bin/env bash
# A real Synapse homeserver for the Matrix bridge tests, in a virtualenv of its own: its pins
# (Twisted, cryptography, …) are not ours, and nothing of it may leak into Hermes's environment.
# Idempotent: does nothing when .synapse-venv already has this version.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION="1.163.2"
VENV=".synapse-venv"
# The marker is written last: a half-finished install is redone.
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/hermes-synapse-version" 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
echo "Installing matrix-synapse $VERSION into $VENV for the Matrix bridge tests"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "matrix-synapse==$VERSION" 2>&1 | { grep -v '^WARNING: Location' || true; }
"$VENV/bin/python" -c "import synapse.app.homeserver"
echo "$VERSION" > "$VENV/hermes-synapse-version"
