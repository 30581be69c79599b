#!/usr/bin/env bash
# Prints the -ldflags that stamp bin/seckill's identity (internal/buildinfo:
# `seckill version`, seckill_build_info, the traces' service.version) from
# the git checkout it runs in: the commit (git rev-parse HEAD) and, on a
# v* tag, the version (git describe). The toolchain stamps the commit
# itself only where it detects the repository (not in a git worktree, nor
# in an image built without .git), so every build of the binary uses this:
#   go build -ldflags "-s -w $(scripts/ldflags.sh)" ./cmd/seckill
# Outside a git checkout it prints nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
commit="$(git rev-parse HEAD 2>/dev/null)" || exit 0
pkg=github.com/seckill/seckill/internal/buildinfo
flags="-X $pkg.commit=$commit"
if version="$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null)"; then
	flags+=" -X $pkg.version=$version"
fi
printf '%s\n' "$flags"
