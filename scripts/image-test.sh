#!/usr/bin/env bash
# `make image-test` (after `make image`): runs the image for real with podman, e2e/image/test_image.py:
# size, non-root, read-only root, HEALTHCHECK, check-config, a sign-in through the container against
# the development provider, the session kept across restarts of Relais and of Redis (AOF), and
# docker/compose.yaml brought up and down with podman-compose; docker/compose.demo.yaml (Relais, the
# three development providers, Redis) brought up on make demo's ports and walked in Chromium by the
# e2e journeys (e2e/image/test_compose_demo.py).
#
# Environment: IMAGE (default localhost/relais:latest); IMAGE_BASE local (default) or public, as
# for scripts/image-build.sh; REDIS_IMAGE (default: localhost/relais-redis:7, built here from
# docker/redis.Dockerfile on the local base; with IMAGE_BASE=public, the official redis:7-bookworm).
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/docker/containers.conf}
image=${IMAGE:-localhost/relais:latest}
base_mode=${IMAGE_BASE:-local}
local_base=${LOCAL_BASE_IMAGE:-localhost/debian:bookworm}
started=$SECONDS

scripts/image-podman.sh
# requests (and joserfc) for the test, podman-compose for the compose file; as
# scripts/ensure-python-packages.sh does, the user site when Debian's python3 refuses plain pip.
scripts/ensure-python-packages.sh
if ! python3 -c "import podman_compose" 2>/dev/null; then
    echo "Installing from PyPI: podman-compose"
    python3 -m pip install --quiet "podman-compose>=1.2" 2>/dev/null \
        || python3 -m pip install --quiet --user --break-system-packages "podman-compose>=1.2"
    python3 -c "import podman_compose"
fi

podman image exists "$image" || { echo "image-test: no image $image: run make image first" >&2; exit 1; }

case "$base_mode" in
local)
    redis_image=${REDIS_IMAGE:-localhost/relais-redis:7}
    scripts/image-base.sh "$local_base"
    echo "Building $redis_image (docker/redis.Dockerfile on $local_base)"
    podman build --quiet --format docker --file docker/redis.Dockerfile --build-arg "BASE=$local_base" \
        --tag "$redis_image" docker >/dev/null
    ;;
public)
    redis_image=${REDIS_IMAGE:-docker.io/library/redis:7-bookworm}
    podman image exists "$redis_image" || podman pull "$redis_image"
    ;;
*) echo "image-test: IMAGE_BASE must be local or public, not '$base_mode'" >&2; exit 2 ;;
esac

# Whatever this run leaves behind if the test process dies (it removes its own otherwise).
export IMAGE_TEST_PREFIX=relais-image-test-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
remove_leftovers() {
    podman ps --all --format '{{.Names}}' | grep "^$IMAGE_TEST_PREFIX" | xargs -r podman rm --force >/dev/null 2>&1 || true
    podman volume ls --format '{{.Name}}' | grep "^$IMAGE_TEST_PREFIX" | xargs -r podman volume rm --force >/dev/null 2>&1 || true
}
trap remove_leftovers EXIT
RELAIS_IMAGE=$image REDIS_IMAGE=$redis_image python3 -m unittest discover -s e2e/image -t e2e/image -p 'test_*.py' -v
echo "image-test: passed in $((SECONDS - started)) s"
