#!/usr/bin/env bash
# `go tool task test:image`: builds the Containerfile's image with Debian's
# podman (rootful, vfs storage under .data/podman), its binary built here
# (the Containerfile's Go stage needs a Go image, which cannot be pulled),
# runs the API and the worker as containers in production mode (secrets
# from mounted files, no development defaults) on their own network
# namespaces with published ports (-p), against the test services, and
# drives one reservation through them end to end (test/e2e/image_test.go, build
# tag `image`). Not part of `task test`: podman
# stays out of CI.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG="test:image"
cd "$ROOT"

# shellcheck source=scripts/podman.sh
source "$ROOT/scripts/podman.sh"
podman_setup
# Each container has its own network (slirp4netns) with its ports published
# on the host's loopback; it reaches the test services, which listen on the
# host's 127.0.0.1, at 10.0.2.2 (allow_host_loopback).
run_opts=(--network slirp4netns:allow_host_loopback=true --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
host=10.0.2.2
image="localhost/seckill:test"
suffix="$$"
api_name="seckill-api-test-$suffix"
worker_name="seckill-worker-test-$suffix"


cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for c in "$api_name" "$worker_name"; do
		if podman_lab container exists "$c" 2>/dev/null; then
			if ((rc != 0)); then
				log "last lines of container $c:"
				podman_lab logs --tail 30 "$c" >&2 || true
			fi
			podman_lab rm -f -t 5 "$c" >/dev/null || true
		fi
	done
	rm -rf "${secrets:-}"
	"$ROOT/scripts/services.sh" down test || rc=1
	log "exit $rc"
	exit "$rc"
}
trap_exits cleanup

"$ROOT/scripts/services.sh" up test

build_seckill_image "$image"

# Production mode: every secret from a file mounted read-only, as a
# Kubernetes Secret or podman secret would be; the test mints its tokens
# with the same secrets.
secrets="$(mktemp -d)"
for name in jwt admin_jwt payment token_key; do
	head -c 32 /dev/urandom | base64 | tr -d '\n' >"$secrets/$name"
done
chmod 0755 "$secrets" && chmod 0644 "$secrets"/*
api_addr="127.0.0.1:$(free_port)"
metrics_addr="127.0.0.1:$(free_port)"
env_opts=(
	-v "$secrets:/run/secrets/seckill:ro"
	-e SECKILL_JWT_SECRET_FILE=/run/secrets/seckill/jwt
	-e SECKILL_ADMIN_JWT_SECRET_FILE=/run/secrets/seckill/admin_jwt
	-e SECKILL_PAYMENT_SECRET_FILE=/run/secrets/seckill/payment
	-e SECKILL_TOKEN_KEY_FILE=/run/secrets/seckill/token_key
	-e "REDIS_ADDR=$host:${SECKILL_TEST_REDIS_PORT:-16379}"
	-e "MYSQL_DSN=root@tcp($host:${SECKILL_TEST_MYSQL_PORT:-13306})/seckill_test"
	-e "TEMPORAL_ADDRESS=$host:${SECKILL_TEST_TEMPORAL_PORT:-17233}"
	-e "SECKILL_TASK_QUEUE=image-test-$suffix"
	# Other tests' sales share the test database: start only our own.
	-e SECKILL_SALE_SWEEP=off
)
# The image's own listen addresses (ENV API_ADDR=:8080,
# WORKER_METRICS_ADDR=:9091) are kept: only the published ports differ.
log "starting the worker container (metrics published on $metrics_addr)"
podman_lab run -d --name "$worker_name" "${run_opts[@]}" "${env_opts[@]}" -p "$metrics_addr:9091" \
	-e "SECKILL_RELAY_CONSUMER=$worker_name" "$image" worker >/dev/null
log "starting the API container (published on $api_addr)"
podman_lab run -d --name "$api_name" "${run_opts[@]}" "${env_opts[@]}" -p "$api_addr:8080" \
	"$image" api >/dev/null
wait_for "worker container" "$START_TIMEOUT" "" /dev/null http_ok "http://$metrics_addr/metrics"
wait_for "API container" "$START_TIMEOUT" "" /dev/null http_ok "http://$api_addr/healthz"
log "both containers answer; running test/e2e/image_test.go"

env_line="$(podman_lab inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$api_name")"
grep -q '^SECKILL_ENV=' <<<"$env_line" && die "the API container runs with SECKILL_ENV set"
SECKILL_IMAGE_API_URL="http://$api_addr" SECKILL_IMAGE_WORKER_METRICS_URL="http://$metrics_addr/metrics" \
	SECKILL_IMAGE_JWT_SECRET="$(cat "$secrets/jwt")" SECKILL_IMAGE_ADMIN_JWT_SECRET="$(cat "$secrets/admin_jwt")" \
	go test -count=1 -tags image -run '^TestImageReservation$' -v ./test/e2e/
