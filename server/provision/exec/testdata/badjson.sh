#!/bin/sh
# A provider program that prints broken answers, chosen by config.mode.
in=$(cat)
mode=$(printf '%s' "$in" | sed -n 's/.*"mode":"\([^"]*\)".*/\1/p')
case "$mode" in
type) echo '{"id": 42, "state": "running"}' ;;
syntax) echo '{"hosts":[{"id":"a"},]}' ;;
cut) printf '{"id":"host-1","node_name":' ;;
unknown) echo '{"id":"host-1","nodename":"x"}' ;;
trailing) echo '{"id":"host-1"} {"id":"host-2"}' ;;
array) echo '[{"id":"host-1"}]' ;;
empty) ;;
noid) echo '{"node_name":"n1","state":"running"}' ;;
otherkey) echo '{"id":"host-1","idempotency_key":"someone-else"}' ;;
control) printf '{"id":"host\\u0000-1"}\n' ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
