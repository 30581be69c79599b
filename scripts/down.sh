#!/usr/bin/env bash
# `go tool task down`: stops exactly what `up` started, by its pid files.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=down

"$ROOT/scripts/prometheus.sh" stop "$ROOT/.data" "${PROMETHEUS_ADDR:-127.0.0.1:9090}"
"$ROOT/scripts/app.sh" stop api
"$ROOT/scripts/app.sh" stop worker
"$ROOT/scripts/jaeger.sh" stop "$ROOT/.data"
"$ROOT/scripts/services.sh" down dev
