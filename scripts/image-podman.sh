#!/usr/bin/env bash
# Installs podman, runc and debootstrap when one is missing, with their recommended packages
# (buildah, catatonit, uidmap, ...): the installation docs/operations.md ("Container image")
# describes and CI uses. podman then reads docker/containers.conf through CONTAINERS_CONF.
set -euo pipefail
exec "$(dirname "$0")/ensure-debian-packages.sh" --with-recommends podman runc debootstrap
