#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet; does nothing when all are present.
# --with-recommends: also their recommended packages (podman needs buildah, catatonit, uidmap...).
set -euo pipefail
recommends=(--no-install-recommends)
if [ "${1:-}" = "--with-recommends" ]; then
    recommends=()
    shift
fi
missing=()
for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing missing Debian packages: ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${recommends[@]}" "${missing[@]}"
