#!/usr/bin/env bash
# Installs joserfc (PyPI) for the JOSE cross-check tests when `python3 -c "import joserfc"` fails.
# Debian's own python3 refuses plain pip installs (PEP 668); then the user site is used.
set -euo pipefail
python3 -c "import joserfc" 2>/dev/null && exit 0
echo "Installing joserfc from PyPI for the JOSE cross-check tests"
python3 -m pip install --quiet "joserfc>=1.6" 2>/dev/null \
    || python3 -m pip install --quiet --user --break-system-packages "joserfc>=1.6"
python3 -c "import joserfc"
