#!/usr/bin/env bash
# `go tool task test:image`: builds the Containerfile's image with Debian's
# podman (rootful, vfs storage under .data/podman) from a static binary built
# here, runs the API and the worker as containers against the test services,
# and drives one reservation through them end to end (e2e/image_test.go,
# build tag `image`). Not part of `task test`: podman stays out of CI.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG="test:image"
cd "$ROOT"

((EUID == 0)) || die "rootful podman: run as root"
need_packages podman:podman runc:runc curl:curl

# runc and cgroupfs: crun and the systemd cgroup manager fail here; vfs
# needs no overlay support from the kernel. Containers share the host's
# network, so they reach the test services on 127.0.0.1.
store="$ROOT/.data/podman"
podman=(podman --root "$store/root" --runroot "$store/run" --storage-driver vfs
	--cgroup-manager cgroupfs --runtime runc --events-backend file)
run_opts=(--network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
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

api_addr="127.0.0.1:$(free_port)"
metrics_addr="127.0.0.1:$(free_port)"
env_opts=(
	-e SECKILL_ENV=dev
	-e "REDIS_ADDR=127.0.0.1:${SECKILL_TEST_REDIS_PORT:-16379}"
	-e "MYSQL_DSN=root@tcp(127.0.0.1:${SECKILL_TEST_MYSQL_PORT:-13306})/seckill_test"
	-e "TEMPORAL_ADDRESS=127.0.0.1:${SECKILL_TEST_TEMPORAL_PORT:-17233}"
	-e "SECKILL_TASK_QUEUE=image-test-$suffix"
	# Other tests' sales share the test database: start only our own.
	-e SECKILL_SALE_SWEEP=off
)
log "starting the worker container (metrics $metrics_addr)"
"${podman[@]}" run -d --name "$worker_name" "${run_opts[@]}" "${env_opts[@]}" \
	-e "WORKER_METRICS_ADDR=$metrics_addr" -e "SECKILL_RELAY_CONSUMER=$worker_name" "$image" worker >/dev/null
log "starting the API container ($api_addr)"
"${podman[@]}" run -d --name "$api_name" "${run_opts[@]}" "${env_opts[@]}" \
	-e "API_ADDR=$api_addr" "$image" api >/dev/null
wait_for "worker container" "$START_TIMEOUT" "" /dev/null http_ok "http://$metrics_addr/metrics"
wait_for "API container" "$START_TIMEOUT" "" /dev/null http_ok "http://$api_addr/healthz"
log "both containers answer; running e2e/image_test.go"

SECKILL_IMAGE_API_URL="http://$api_addr" SECKILL_IMAGE_WORKER_METRICS_URL="http://$metrics_addr/metrics" \
	go test -count=1 -tags image -run '^TestImageReservation$' -v ./e2e/
