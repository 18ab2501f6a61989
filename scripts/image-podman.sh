#!/usr/bin/env bash
# Installs podman, runc and debootstrap when one is missing, with their recommended packages
# (buildah, catatonit, uidmap, ...): the installation docs/operations.md ("Container image")
# describes and CI uses. podman then reads docker/containers.conf through CONTAINERS_CONF.
set -euo pipefail
missing=()
for package in podman runc debootstrap; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing missing Debian packages: ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
