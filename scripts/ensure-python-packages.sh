#!/usr/bin/env bash
# Installs the PyPI packages the cross-check tests use, when missing: joserfc (JOSE checks) and
# requests (the development provider check). Debian's own python3 refuses plain pip installs
# (PEP 668); then the user site is used.
set -euo pipefail
missing=()
python3 -c "import joserfc" 2>/dev/null || missing+=("joserfc>=1.6")
python3 -c "import requests" 2>/dev/null || missing+=("requests>=2.28")
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing from PyPI for the cross-check tests: ${missing[*]}"
python3 -m pip install --quiet "${missing[@]}" 2>/dev/null \
    || python3 -m pip install --quiet --user --break-system-packages "${missing[@]}"
python3 -c "import joserfc, requests"
