#!/usr/bin/env bash
# `make image`: builds docker/Dockerfile with podman into $IMAGE (default localhost/relais:latest).
#
#   IMAGE_BASE=local (default)  both stages FROM localhost/debian:bookworm (scripts/image-base.sh
#                               makes it with debootstrap when missing); the build stage gets the
#                               host's Swift toolchain and SwiftPM mirrors as read-only mounts.
#                               For machines without an image registry, such as this project's CI.
#   IMAGE_BASE=public           debian:bookworm-slim and swift:6.3-bookworm from Docker Hub, the
#                               Dockerfile's defaults; nothing from the host.
#
# podman reads docker/containers.conf (CONTAINERS_CONF) unless CONTAINERS_CONF is already set.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:-localhost/relais:latest}
base_mode=${IMAGE_BASE:-local}
local_base=${LOCAL_BASE_IMAGE:-localhost/debian:bookworm}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/docker/containers.conf}

scripts/image-podman.sh
arguments=(--format docker --file docker/Dockerfile --tag "$image")
# The commit `relais --version` names, as the Makefile's RELAIS_VERSION_FLAGS records it.
if commit=$(git rev-parse --verify --quiet HEAD 2>/dev/null); then
    if git diff --quiet HEAD -- 2>/dev/null; then suffix=0000; else suffix=2d44; fi
    arguments+=(--build-arg "RELAIS_BUILD_ID=0x524c$commit$suffix")
fi

case "$base_mode" in
local)
    scripts/image-base.sh "$local_base"
    swift_binary=$(command -v "${SWIFT:-swift}" || true)
    [ -n "$swift_binary" ] || { echo "image: no swift on PATH (the build stage uses the host's toolchain)" >&2; exit 1; }
    # <toolchain>/usr/bin/swift -> <toolchain>
    toolchain=$(dirname "$(dirname "$(dirname "$(readlink -f "$swift_binary")")")")
    [ "$toolchain" != / ] && [ -x "$toolchain/usr/bin/swift-build" ] || {
        echo "image: $swift_binary is not in a self-contained toolchain (<dir>/usr/bin) to mount; use IMAGE_BASE=public" >&2
        exit 1
    }
    scratch=$PWD/.build-image
    mkdir -p "$scratch"
    # The host's git URL rewrites (e.g. github.com -> local mirrors), and the mirrors they point at.
    gitconfig=$scratch/gitconfig
    : >"$gitconfig"
    declare -A mirrors=()
    while read -r key target; do
        [ -n "$key" ] || continue
        base=${key#url.}
        base=${base%.insteadof}
        git config --file "$gitconfig" --add "url.$base.insteadOf" "$target"
        case "$base" in
        /*) [ -d "$base" ] && mirrors[${base%/}]=1 ;;
        esac
    done < <(git config --get-regexp '^url\..*\.insteadof$' || true)
    arguments+=(--build-arg "BASE=$local_base" --build-arg "SWIFT_IMAGE=$local_base"
        --volume "$toolchain:/opt/swift:ro" --volume "$gitconfig:/etc/gitconfig:ro")
    for mirror in "${!mirrors[@]}"; do arguments+=(--volume "$mirror:$mirror:ro"); done
    ;;
public) ;;
*) echo "image: IMAGE_BASE must be local or public, not '$base_mode'" >&2; exit 2 ;;
esac

started=$SECONDS
echo "podman build ${arguments[*]} ."
podman build "${arguments[@]}" .
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "Built $image in $((SECONDS - started)) s: $((size / 1000000)) MB ($size bytes)"
