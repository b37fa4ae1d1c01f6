#!/bin/sh
# A provider program that keeps its "hosts" as files in the request's
# config.state_dir: one file per idempotency key holding the host's JSON.
# It records its environment and request so the tests can check them.
set -eu
op="$1"
in=$(cat)
field() { printf '%s' "$in" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
dir=$(field state_dir)
[ -d "$dir" ] || { echo "state_dir $dir missing" >&2; exit 2; }
env > "$dir/env.$op"
printf '%s' "$in" > "$dir/stdin.$op"
case "$op" in
create)
	key=$(field idempotency_key)
	name=$(field node_name)
	if [ -f "$dir/host.$key" ]; then
		cat "$dir/host.$key"
		exit 0
	fi
	n=$(ls "$dir" | grep -c '^host\.' || true)
	printf '{"id":"host-%s","pool":"%s","idempotency_key":"%s","node_name":"%s","state":"running"}' \
		"$((n + 1))" "$(field pool)" "$key" "$name" > "$dir/host.$key"
	printf '{"id":"host-%s","node_name":"%s","state":"running"}\n' "$((n + 1))" "$name"
	;;
terminate)
	id=$(field id)
	for f in "$dir"/host.*; do
		[ -f "$f" ] || continue
		if grep -q "\"id\":\"$id\"" "$f"; then rm -f "$f"; fi
	done
	echo '{}'
	;;
list)
	printf '{"hosts":['
	sep=""
	for f in "$dir"/host.*; do
		[ -f "$f" ] || continue
		printf '%s%s' "$sep" "$(cat "$f")"
		sep=","
	done
	printf ']}\n'
	;;
*)
	echo "unknown op $op" >&2
	exit 2
	;;
esac
