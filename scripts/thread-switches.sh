#!/usr/bin/env bash
# Prints the context switches (voluntary + involuntary) of every thread of process $1 so far, summed:
# the thread switches docs/capacity.md counts per sign-in. Threads that ended are not counted, so
# sample before and after a run of a process whose threads live as long as it does.
set -euo pipefail
total=0
for status in /proc/"$1"/task/*/status; do
    while read -r name value; do
        case "$name" in
            voluntary_ctxt_switches:|nonvoluntary_ctxt_switches:) total=$((total + value)) ;;
        esac
    done <"$status" 2>/dev/null || true
done
echo "$total"
