#!/usr/bin/env bash
# Makes the local Debian base image (localhost/debian:bookworm) that `make image` and
# `make image-test` build on when no image registry is reachable: debootstrap's minbase of
# bookworm, trimmed the way debian:bookworm-slim is (no apt lists or caches, no documentation,
# manual pages or locales, and dpkg told to leave them out of every later install), then imported
# into podman. Does nothing when the image already exists.
#
#   scripts/image-base.sh [IMAGE]        default IMAGE: localhost/debian:bookworm
#
# Environment: CONTAINERS_CONF (default docker/containers.conf), DEBIAN_MIRROR (default: the first
# URI of /etc/apt/sources.list.d/debian.sources, else http://deb.debian.org/debian).
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:-localhost/debian:bookworm}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/docker/containers.conf}

if podman image exists "$image"; then
    exit 0
fi

sources=/etc/apt/sources.list.d/debian.sources
mirror=${DEBIAN_MIRROR:-$(awk '/^URIs:/ { print $2; exit }' "$sources" 2>/dev/null || true)}
mirror=${mirror:-http://deb.debian.org/debian}
security_mirror=$(awk '/^URIs:/ && /security/ { print $2; exit }' "$sources" 2>/dev/null || true)
security_mirror=${security_mirror:-http://deb.debian.org/debian-security}

sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
# Under the repository's ignored .build-image/ (also outside every build context), removed after.
mkdir -p .build-image
work=$(mktemp -d "$PWD/.build-image/debootstrap.XXXXXX")
root=$work/root
trap '"${sudo_cmd[@]}" rm -rf "$work"' EXIT

echo "Making $image with debootstrap (minbase bookworm from $mirror)"
started=$SECONDS
"${sudo_cmd[@]}" debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log" >&2
    echo "image-base: debootstrap failed (log above)" >&2
    exit 1
}

# What debian:bookworm-slim does (its rootfs recipe, debuerreotype's slimify and docker-clean):
# later apt-get installs leave these out too.
"${sudo_cmd[@]}" tee "$root/etc/dpkg/dpkg.cfg.d/docker-slim" >/dev/null <<'CONF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
CONF
"${sudo_cmd[@]}" tee "$root/etc/apt/apt.conf.d/docker-clean" >/dev/null <<'CONF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::GzipIndexes "true";
Acquire::CompressionTypes::Order:: "gz";
APT::Install-Recommends "false";
APT::Install-Suggests "false";
CONF
# The same suites the host uses: the release, its updates and the security archive.
"${sudo_cmd[@]}" tee "$root/etc/apt/sources.list" >/dev/null <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security_mirror bookworm-security main
SOURCES
"${sudo_cmd[@]}" find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
"${sudo_cmd[@]}" find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
"${sudo_cmd[@]}" rm -rf "$root"/usr/share/{man,groff,info,lintian,linda,locale}/* \
    "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/* \
    "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/var/cache/debconf/*-old "$root"/tmp/*

"${sudo_cmd[@]}" tar -C "$root" --numeric-owner -c . \
    | podman import --quiet --change 'CMD ["bash"]' - "$image" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "Made $image in $((SECONDS - started)) s: $((size / 1000000)) MB"
