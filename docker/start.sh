#!/bin/sh
# Start Hermes: apply database migrations, then replace this shell with Daphne (so Daphne gets
# the container's signals). The image's entrypoint; it runs the same way from a checkout.
#
#   HERMES_BIND        address to listen on (default 127.0.0.1; the image sets 0.0.0.0)
#   HERMES_PORT        port to listen on (default 8092; 0 picks a free one, logged at start)
#   HERMES_ACCESS_LOG  true: Daphne writes an access log line per request to stdout
#   HERMES_PYTHON      interpreter to use (default: the project's .venv, else python3)
set -eu

cd "$(dirname "$0")/.."

if [ -n "${HERMES_PYTHON:-}" ]; then
    python="$HERMES_PYTHON"
elif [ -x .venv/bin/python ]; then
    python=.venv/bin/python
else
    python=python3
fi

echo "hermes: applying database migrations" >&2
"$python" manage.py migrate --noinput

set -- --bind "${HERMES_BIND:-127.0.0.1}" --port "${HERMES_PORT:-8092}" -v 0
case "${HERMES_ACCESS_LOG:-false}" in
    1 | true | yes | on) set -- "$@" --access-log - ;;
esac

echo "hermes: starting Daphne on ${HERMES_BIND:-127.0.0.1}:${HERMES_PORT:-8092}" >&2
exec "$python" -m hermes_site.serve "$@" hermes_site.asgi:application
