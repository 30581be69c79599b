#!/usr/bin/env bash
# The drain and the database path on one MariaDB and on a Galera cluster,
# in turn, in one run.
#   scripts/bench-db.sh [seckill-bench flags]
# The dev services as `bench` uses them; the cluster (three nodes behind
# HAProxy, internal/testkit/galera) is the run's own, started in its log
# directory and stopped at its end.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=bench-db
cd "$ROOT"

need_packages /usr/lib/galera/libgalera_smm.so:galera-4 rsync:rsync ss:iproute2 haproxy:haproxy
"$ROOT/scripts/services.sh" up dev
go build -buildvcs=auto -ldflags "$(./scripts/ldflags.sh)" -o bin/seckill ./cmd/seckill
go build -o bin/seckill-bench ./cmd/seckill-bench
./bin/seckill-bench -seckill bin/seckill -out test/bench/results/db -db single,galera "$@"
