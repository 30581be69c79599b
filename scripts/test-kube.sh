#!/usr/bin/env bash
# `go tool task test:kube`: renders the Kubernetes manifests through the
# test overlay (deploy/k8s/test) with `kubectl kustomize`, plays the API and
# the worker with `podman kube play` (rootful Debian podman, the image built
# here as test:image builds it) in production mode against the test
# services, drives one reservation through them end to end
# (test/e2e/image_test.go, build tag `image`), then `kube down`. Not part of
# `task test`: podman stays out of CI.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG="test:kube"
cd "$ROOT"
# shellcheck source=scripts/podman.sh
source "$ROOT/scripts/podman.sh"
podman_setup
command -v kubectl >/dev/null || die "kubectl (with kustomize) is needed"

overlay="$ROOT/deploy/k8s/test"
rendered="$(mktemp --suffix .yaml)"
played=""
# The base reads its git-ignored secrets.env even though the overlay drops
# the Secret: a throwaway one is written when there is none, and removed.
base_secrets="$ROOT/deploy/k8s/base/secrets.env"
wrote_base_secrets=""

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n "$played" ]]; then
		if ((rc != 0)); then
			for c in $(podman_lab ps -a --format '{{.Names}}' --filter label=app.kubernetes.io/part-of=seckill); do
				log "last lines of container $c:"
				podman_lab logs --tail 30 "$c" >&2 || true
			done
		fi
		podman_lab kube down "$rendered" >/dev/null || rc=1
	fi
	rm -f "$rendered" "$overlay/test.env" "$overlay/secrets.env"
	if [[ -n "$wrote_base_secrets" ]]; then
		rm -f "$base_secrets"
	fi
	"$ROOT/scripts/services.sh" down test || rc=1
	log "exit $rc"
	exit "$rc"
}
trap_exits cleanup

"$ROOT/scripts/services.sh" up test
build_seckill_image localhost/seckill:test

# Production mode: random secrets, no SECKILL_ENV; the test mints its
# tokens with the same secrets.
for name in JWT ADMIN_JWT PAYMENT TOKEN_KEY; do
	printf 'SECKILL_%s_SECRET=%s\n' "$name" "$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
done | sed 's/^SECKILL_TOKEN_KEY_SECRET=/SECKILL_TOKEN_KEY=/' >"$overlay/secrets.env"
if [[ ! -e "$base_secrets" ]]; then
	wrote_base_secrets=1
	cp "$overlay/secrets.env" "$base_secrets"
fi
api_port="$(free_port)" metrics_port="$(free_port)"
cat >"$overlay/test.env" <<ENV
REDIS_ADDR=127.0.0.1:${SECKILL_TEST_REDIS_PORT:-16379}
MYSQL_DSN=root@tcp(127.0.0.1:${SECKILL_TEST_MYSQL_PORT:-13306})/seckill_test
TEMPORAL_ADDRESS=127.0.0.1:${SECKILL_TEST_TEMPORAL_PORT:-17233}
API_ADDR=127.0.0.1:$api_port
ADMIN_ADDR=
WORKER_METRICS_ADDR=127.0.0.1:$metrics_port
SECKILL_TASK_QUEUE=kube-test-$$
SECKILL_SALE_SWEEP=off
ENV
kubectl kustomize "$overlay" >"$rendered"
log "rendered $(grep -c '^kind:' "$rendered") objects; playing them"
played=1
podman_lab kube play --network host "$rendered" >/dev/null
wait_for "worker pod" "$START_TIMEOUT" "" /dev/null http_ok "http://127.0.0.1:$metrics_port/metrics"
wait_for "API pod" "$START_TIMEOUT" "" /dev/null http_ok "http://127.0.0.1:$api_port/healthz"
log "both pods answer; running test/e2e/image_test.go"
secret() { sed -n "s/^$1=//p" "$overlay/secrets.env"; }
SECKILL_IMAGE_API_URL="http://127.0.0.1:$api_port" SECKILL_IMAGE_WORKER_METRICS_URL="http://127.0.0.1:$metrics_port/metrics" \
	SECKILL_IMAGE_JWT_SECRET="$(secret SECKILL_JWT_SECRET)" SECKILL_IMAGE_ADMIN_JWT_SECRET="$(secret SECKILL_ADMIN_JWT_SECRET)" \
	go test -count=1 -tags image -run '^TestImageReservation$' -v ./test/e2e/
