#!/bin/sh
# Entrypoint of the dppca-dask image (run under tini). A full command runs as given, so the same
# image serves as scheduler (`dask scheduler`), worker (`dask worker ...`) and runner; anything
# else is a dppca-dask subcommand (`run /config/run.yaml`, `inspect /output/run`, `versions`).
set -e
case "${1:-}" in
  "") exec dppca-dask --help ;;
  dask|dppca-dask|python|python3|sh|bash) exec "$@" ;;
  *) exec dppca-dask "$@" ;;
esac
