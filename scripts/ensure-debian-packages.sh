#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet; does nothing when all are present.
# --with-recommends: also their recommended packages (podman needs buildah, catatonit, uidmap...).
# On a system without dpkg and apt-get (macOS, another Linux), it installs nothing: it checks what
# each package provides (a pkg-config module or a command) and names what is missing, with
# Homebrew's names, then exits 1 if anything is.
set -euo pipefail
recommends=(--no-install-recommends)
if [ "${1:-}" = "--with-recommends" ]; then
    recommends=()
    shift
fi

# What a Debian package provides here, as "pkg-config:MODULE", "command:NAME[|NAME]" or "none",
# and the Homebrew formula that provides it.
provides() {
    case "$1" in
    libcurl4-openssl-dev) echo "pkg-config:libcurl curl" ;;
    libssl-dev) echo "pkg-config:libcrypto openssl@3" ;;
    libhiredis-dev) echo "pkg-config:hiredis hiredis" ;;
    libqrencode-dev) echo "pkg-config:libqrencode qrencode" ;;
    redis-server) echo "command:redis-server redis" ;;
    pkg-config) echo "command:pkg-config pkgconf" ;;
    openssl) echo "command:openssl openssl@3" ;;
    python3) echo "command:python3 python" ;;
    python3-pip) echo "command:pip3 python" ;;
    curl) echo "command:curl curl" ;;
    chromium) echo "command:chromium|chromium-browser|google-chrome chromium" ;;
    chromium-driver) echo "command:chromedriver chromedriver" ;;
    nginx-light) echo "command:nginx nginx" ;;
    wrk) echo "command:wrk wrk" ;;
    apache2) echo "command:apachectl|apache2ctl httpd" ;;
    podman) echo "command:podman podman" ;;
    valgrind) echo "command:valgrind valgrind" ;;
    *) echo "none -" ;;
    esac
}

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    absent=()
    brew=()
    for package in "$@"; do
        read -r check formula <<<"$(provides "$package")"
        found=no
        case "$check" in
        pkg-config:*) command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "${check#pkg-config:}" && found=yes ;;
        command:*)
            IFS='|' read -r -a names <<<"${check#command:}"
            for name in "${names[@]}"; do command -v "$name" >/dev/null 2>&1 && found=yes; done
            ;;
        none) found=unknown ;;
        esac
        if [ "$found" = no ]; then
            absent+=("$package")
            [ "$formula" != - ] && brew+=("$formula")
        fi
    done
    [ ${#absent[@]} -eq 0 ] && exit 0
    echo "This system has no apt-get, so nothing was installed. Missing here: ${absent[*]} (their Debian names)." >&2
    if [ ${#brew[@]} -gt 0 ]; then
        echo "On macOS with Homebrew: brew install $(printf '%s\n' "${brew[@]}" | sort -u | tr '\n' ' ')" >&2
    fi
    echo "Or install them with your system's package manager, then run this again." >&2
    exit 1
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
