#!/usr/bin/env bash
# `go tool task test:image`: builds the Containerfile's runtime image with
# Debian's podman (rootful, vfs storage under .data/podman) from a static
# binary built here, runs the API and the worker as containers in
# production mode (secrets from mounted files, no development defaults) on
# their own network namespaces with published ports (-p), against the test
# services, and drives one reservation through them end to end
# (e2e/image_test.go, build tag `image`). Not part of `task test`: podman
# stays out of CI.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG="test:image"
cd "$ROOT"

((EUID == 0)) || die "rootful podman: run as root"
need_packages podman:podman runc:runc curl:curl slirp4netns:slirp4netns

# runc and cgroupfs: crun and the systemd cgroup manager fail here; vfs
# needs no overlay support from the kernel. Each container has its own
# network (slirp4netns) with its ports published on the host's loopback;
# it reaches the test services, which listen on the host's 127.0.0.1, at
# 10.0.2.2 (allow_host_loopback).
store="$ROOT/.data/podman"
podman=(podman --root "$store/root" --runroot "$store/run" --storage-driver vfs
	--cgroup-manager cgroupfs --runtime runc --events-backend file)
run_opts=(--network slirp4netns:allow_host_loopback=true --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
host=10.0.2.2
image="localhost/seckill:test"
suffix="$$"
api_name="seckill-api-test-$suffix"
worker_name="seckill-worker-test-$suffix"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http_ok() { [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1")" == 200 ]]; }

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for c in "$api_name" "$worker_name"; do
		if "${podman[@]}" container exists "$c" 2>/dev/null; then
			if ((rc != 0)); then
				log "last lines of container $c:"
				"${podman[@]}" logs --tail 30 "$c" >&2 || true
			fi
			"${podman[@]}" rm -f -t 5 "$c" >/dev/null || true
		fi
	done
	rm -rf "${secrets:-}"
	"$ROOT/scripts/services.sh" down test || rc=1
	log "exit $rc"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$ROOT/scripts/services.sh" up test

ctx="$(mktemp -d)"
log "building the static binary (CGO_ENABLED=0) into $ctx"
CGO_ENABLED=0 go build -trimpath -tags timetzdata -ldflags '-s -w' -o "$ctx/seckill" ./cmd/seckill
# The CA roots for TLS (Temporal Cloud, a managed database).
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || need_packages update-ca-certificates:ca-certificates
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
log "building $image"
"${podman[@]}" build --quiet -f "$ROOT/Containerfile" -t "$image" "$ctx" >/dev/null
rm -rf "$ctx"
log "image: $("${podman[@]}" image inspect --format '{{.Size}} bytes, user {{.Config.User}}' "$image")"

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
"${podman[@]}" run -d --name "$worker_name" "${run_opts[@]}" "${env_opts[@]}" -p "$metrics_addr:9091" \
	-e "SECKILL_RELAY_CONSUMER=$worker_name" "$image" worker >/dev/null
log "starting the API container (published on $api_addr)"
"${podman[@]}" run -d --name "$api_name" "${run_opts[@]}" "${env_opts[@]}" -p "$api_addr:8080" \
	"$image" api >/dev/null
wait_for "worker container" "$START_TIMEOUT" "" /dev/null http_ok "http://$metrics_addr/metrics"
wait_for "API container" "$START_TIMEOUT" "" /dev/null http_ok "http://$api_addr/healthz"
log "both containers answer; running e2e/image_test.go"

env_line="$("${podman[@]}" inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$api_name")"
grep -q '^SECKILL_ENV=' <<<"$env_line" && die "the API container runs with SECKILL_ENV set"
SECKILL_IMAGE_API_URL="http://$api_addr" SECKILL_IMAGE_WORKER_METRICS_URL="http://$metrics_addr/metrics" \
	SECKILL_IMAGE_JWT_SECRET="$(cat "$secrets/jwt")" SECKILL_IMAGE_ADMIN_JWT_SECRET="$(cat "$secrets/admin_jwt")" \
	go test -count=1 -tags image -run '^TestImageReservation$' -v ./e2e/
