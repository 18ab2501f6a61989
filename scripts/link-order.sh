#!/usr/bin/env bash
# Regenerates docker/relais.order.gz: the functions of the image's build (static Swift runtime)
# that a relay runs, in the order it first runs them, for the linker (lld --symbol-ordering-file).
#
# Why: the kernel maps a binary's code in windows of 64 KB around each page a process touches
# (fault-around), so code run at start-up and per request, scattered over the 35 MB of text of a
# static build, kept about 20 MB of it resident. Laid out together it takes a few MB (make bench,
# "Resident memory"). A function missing from the list (renamed, new) only sits elsewhere, so a
# stale list costs memory, never correctness; make bench says how much of it the build still has.
#
# How: the static build runs under valgrind's callgrind (every function executed, not a sample)
# through start-up, sign-ins against the development provider, and the resource endpoints.
# Needs valgrind, redis-server, wrk and python3. Takes a few minutes. Usage: make link-order
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/callgrind-relay.sh callgrind.out link-order
.build/release/relais-bench signin --relay "$relay" --seconds 20 --concurrency 2 >/dev/null
token=$(.build/release/relais-bench signin --relay "$relay" --print-tokens | awk -F= '$1=="access_token" {print $2}')
for _ in $(seq 1 20); do
    curl -s -o /dev/null "$relay/healthz"
    curl -s -o /dev/null -H "Authorization: Bearer $token" "$relay/auth?session=1"
    curl -s -o /dev/null -H "Authorization: Bearer $token" "$relay/userinfo"
    curl -s -o /dev/null -u bench-api:callgrind-introspection-secret -d "token=$token" "$relay/introspect"
done
wrk -t1 -c8 -d5s -H "Authorization: Bearer $token" "$relay/auth?session=1" >/dev/null
# A graceful stop: callgrind writes its profile when the process exits.
kill -INT "$relais_pid"
wait "$relais_pid" || true
relais_pid=

python3 - "$work/callgrind.out" "$binary" "$work/relais.order" <<'PY'
import subprocess, sys
profile, binary, out = sys.argv[1:4]
defined = set(subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout.split())
names, seen, in_binary = [], set(), False
for line in open(profile, errors="replace"):
    if line.startswith("ob="):
        in_binary = line.strip() == "ob=" + binary
    elif line.startswith("fn=") and in_binary:
        name = line[3:].strip()
        if name in defined and name not in seen:
            seen.add(name)
            names.append(name)
if len(names) < 1000:
    sys.exit(f"link-order: only {len(names)} functions seen run: is the profile whole?")
open(out, "w").write("\n".join(names) + "\n")
print(f"{len(names)} functions")
PY
gzip -9n <"$work/relais.order" >docker/relais.order.gz
echo "Wrote docker/relais.order.gz"
