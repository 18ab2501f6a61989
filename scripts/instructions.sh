#!/usr/bin/env bash
# Instructions per sign-in and per request of a relay, counted by valgrind's callgrind: the measure
# to compare two builds by. CPU time on a shared machine moves by 10% from run to run; these counts
# stay within half a percent (libcrypto moves most: RSA blinding, ECDSA nonces), so a change of 1% shows. Each figure is the instructions executed by every
# thread of the relay between two dumps (counters zeroed after a warm-up), divided by the sign-ins
# (one at a time) or the requests (wrk, 4 connections) made in between. Split by object: under
# valgrind OpenSSL sees a CPU without AVX-512 or SHA-NI and takes its generic paths, so libcrypto's
# share says nothing of real hardware; compare "the rest" (Relais, the Swift runtime, libc, libcurl).
#
# Runs the image's build (static Swift runtime; valgrind cannot read the shared build's debug
# information). Needs valgrind, redis-server, wrk and python3; about two minutes.
# Usage: scripts/instructions.sh [seconds of each measurement, default 15]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}

source scripts/callgrind-relay.sh 'callgrind.%p' instructions

# The figures of the run between a zero and a dump: per object, divided by the count.
measure() {  # label count-command...; the command prints the count on its last line
    local label=$1; shift
    callgrind_control -z "$relais_pid" >/dev/null 2>&1
    local count
    count=$("$@" | tail -1)
    callgrind_control -d "$relais_pid" >/dev/null 2>&1
    sleep 0.5
    python3 - "$label" "$count" "$work" <<'PY'
import collections, glob, os, sys
label, count, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dump = max(glob.glob(os.path.join(work, "callgrind.*.*")), key=os.path.getmtime)
cost, obj, current, skip = collections.Counter(), None, None, False
# Each executor hop of a task (swift_task_switch: an await's return to its executor) looks the
# task's preferred executor up once, under the task's status lock: counting those lookups counts
# the hops, which tail calls hide from callgrind's call counts of swift_task_switch itself.
callee, hops = None, 0
for line in open(dump, errors="replace"):
    if line.startswith("ob="):
        obj = line[3:].strip()
    elif line.startswith("fn="):
        current = obj
    elif line.startswith("cfn="):
        callee = line[4:].strip()
    elif line.startswith("calls="):
        if callee == "_ZN5swift9AsyncTask24getPreferredTaskExecutorEb":
            hops += int(line[6:].split()[0])
        skip = True  # the next line is the call's inclusive cost, not this function's own
    elif line[:1].isdigit() or line[:1] in "+-*":
        if skip:
            skip = False
            continue
        fields = line.split()
        if len(fields) >= 2:
            cost[current] += int(fields[1])
os.remove(dump)
if count <= 0:
    sys.exit(f"instructions: no {label} counted")
crypto = sum(c for o, c in cost.items() if o and "libcrypto" in o)
total = sum(cost.values())
print(f"{label}: {count} made, {total / count / 1e6:.3f}M instructions each, "
      f"libcrypto {crypto / count / 1e6:.3f}M, the rest {(total - crypto) / count / 1e6:.3f}M, "
      f"{hops / count:.0f} executor hops")
PY
}
signins() {
    .build/release/relais-bench signin --relay "$relay" --seconds "$seconds" --concurrency 1 \
        | awk '{for (i=1;i<=NF;i++) if (index($i, "signins=")==1) print substr($i, 9)}'
}
requests() {  # path [header]
    wrk -t1 -c4 -d"${seconds}s" ${2:+-H "$2"} "$relay$1" | awk '/requests in/ {print $1}'
}
.build/release/relais-bench signin --relay "$relay" --seconds 5 --concurrency 1 >/dev/null  # warm up
measure "sign-ins" signins
token=$(.build/release/relais-bench signin --relay "$relay" --print-tokens | awk -F= '$1=="access_token" {print $2}')
for path in /healthz "/auth?session=1" /userinfo; do
    requests "$path" "Authorization: Bearer $token" >/dev/null  # warm up: the token seen, the body rendered
    measure "GET $path" requests "$path" "Authorization: Bearer $token"
done
