#!/usr/bin/env bash
# `go tool task test:jaeger`: the Jaeger `task up` runs (built once from
# jaeger-dev/go.mod), the real API and worker exporting traces to it, one
# reservation read back through Jaeger's query API (test/e2e/jaeger_test.go,
# build tag `jaeger`). Not part of `task test`: Jaeger stays out of CI.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG="test:jaeger"
cd "$ROOT"

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	"$ROOT/scripts/services.sh" down test || rc=1
	exit "$rc"
}
trap_exits cleanup

"$ROOT/scripts/jaeger.sh" build "$ROOT/.data"
"$ROOT/scripts/services.sh" up test
export SECKILL_TEST_REDIS_ADDR="127.0.0.1:${SECKILL_TEST_REDIS_PORT:-16379}"
export SECKILL_TEST_MYSQL_DSN="root@tcp(127.0.0.1:${SECKILL_TEST_MYSQL_PORT:-13306})/seckill_test"
export SECKILL_TEST_TEMPORAL_ADDRESS="127.0.0.1:${SECKILL_TEST_TEMPORAL_PORT:-17233}"
export SECKILL_JAEGER_BIN="$ROOT/.data/bin/jaeger"
go test -count=1 -tags jaeger -run '^TestJaegerTrace$' -v ./test/e2e/
