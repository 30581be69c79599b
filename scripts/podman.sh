# shellcheck shell=bash
# Sourced by test-image.sh and test-kube.sh (after lib.sh): rootful Debian
# podman as it works on these machines, and seckill's image built with it.

# Storage under .data/podman (vfs needs no overlay support from the
# kernel); runc and cgroupfs (crun and the systemd cgroup manager fail
# here); the ulimits kube play cannot take as flags.
PODMAN_STORE="$ROOT/.data/podman"
export CONTAINERS_CONF="$PODMAN_STORE/containers.conf"

podman_setup() {
	((EUID == 0)) || die "rootful podman: run as root"
	need_packages podman:podman runc:runc curl:curl slirp4netns:slirp4netns catatonit:catatonit
	mkdir -p "$PODMAN_STORE"
	cat >"$CONTAINERS_CONF" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
}

podman_lab() {
	podman --root "$PODMAN_STORE/root" --runroot "$PODMAN_STORE/run" --storage-driver vfs "$@"
}

# build_seckill_image IMAGE: the Containerfile's image. No Go image can be
# pulled here, so its binary is built on this host and handed in as an
# image of its own (BINARY): the Containerfile's Go stage is skipped.
build_seckill_image() {
	local image="$1" ctx
	ctx="$(mktemp -d)"
	log "building the static binary (CGO_ENABLED=0) into $ctx"
	CGO_ENABLED=0 go build -trimpath -tags timetzdata -ldflags "-s -w $("$ROOT/scripts/ldflags.sh")" -o "$ctx/seckill" ./cmd/seckill
	# The CA roots for TLS (Temporal Cloud, a managed database).
	[[ -f /etc/ssl/certs/ca-certificates.crt ]] || need_packages update-ca-certificates:ca-certificates
	cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
	printf 'FROM scratch\nCOPY seckill ca-certificates.crt /out/\n' >"$ctx/Binaryfile"
	podman_lab build --quiet --pull=never -f "$ctx/Binaryfile" -t "$image-binary" "$ctx" >/dev/null
	log "building $image (the Containerfile, its binary from $image-binary)"
	podman_lab build --quiet --pull=never --build-arg "BINARY=$image-binary" -f "$ROOT/Containerfile" -t "$image" "$ctx" >/dev/null
	rm -rf "$ctx"
	log "image: $(podman_lab image inspect --format '{{.Size}} bytes, user {{.Config.User}}' "$image")"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
