#!/bin/sh
# An exec provider (website/docs/provisioning.md) whose hosts are
# `gpulayer agent -client` processes on this machine: a working example of
# the protocol, and a provider for trying scaling without Docker or a cloud.
#
# Pool config (scaling { provider = "exec" config { ... } }):
#   command      = "/abs/path/examples/provision/local-agent.sh"
#   gpulayer     = "/abs/path/bin/gpulayer"   # the agent binary to run
#   state_dir    = "/abs/path/.data/hosts"    # one directory per host
#   http_ports   = "4800"                     # first of 100 ports the agents may use
#   create_delay = "0"                        # seconds create waits first (a slow cloud)
# Needs jq and setsid.
set -eu
op="$1"
in=$(cat)
j() { printf '%s' "$in" | jq -r "$1"; }
# hcl quotes a JSON value as an HCL string: JSON's escapes are HCL's, and
# template sequences are escaped so nothing in a value is evaluated.
hcl() { printf '%s' "$in" | jq "$1 | tostring | gsub(\"\\\\$\\\\{\"; \"\$\${\") | gsub(\"%\\\\{\"; \"%%{\")"; }
state=$(j '.config.state_dir // empty')
bin=$(j '.config.gpulayer // empty')
case "$state" in /*) ;; *) echo "config.state_dir must be an absolute path" >&2; exit 2 ;; esac
mkdir -p "$state"
pool=$(j .pool)

case "$op" in
create)
	case "$bin" in /*) ;; *) echo "config.gpulayer must be an absolute path" >&2; exit 2 ;; esac
	key=$(j .idempotency_key)
	id="local-$(printf '%s\n%s' "$pool" "$key" | sha256sum | cut -c1-16)"
	dir="$state/$id"
	# Idempotent on the key: the host made for it is the answer.
	if [ -f "$dir/host.json" ]; then
		jq '{id, node_name, state}' "$dir/host.json"
		exit 0
	fi
	sleep "$(j '.config.create_delay // "0"')"
	base=$(j '.config.http_ports // "4800"')
	port=""
	for i in $(seq 0 99); do
		p=$((base + i))
		if ! grep -qx "$p" "$state"/*/port 2>/dev/null; then port=$p; break; fi
	done
	[ -n "$port" ] || { echo "no free port in $base-$((base + 99))" >&2; exit 1; }
	mkdir -p "$dir/data"
	echo "$port" > "$dir/port"
	umask 077
	{
		echo "name       = $(hcl .node_name)"
		echo "data_dir   = $(printf '%s' "$dir/data" | jq -R .)"
		echo "bind_addr  = \"127.0.0.1\""
		echo "ports { http = $port }"
		[ -n "$(j '.join.region')" ] && echo "region     = $(hcl .join.region)"
		[ -n "$(j '.join.datacenter')" ] && echo "datacenter = $(hcl .join.datacenter)"
		[ -n "$(j '.join.token')" ] && echo "acl { token = $(hcl .join.token) }"
		echo "client {"
		echo "  enabled   = true"
		echo "  servers   = $(printf '%s' "$in" | jq -c '.join.servers')"
		echo "  node_pool = $(hcl .pool)"
		[ -n "$(j '.shape.node_class')" ] && echo "  node_class = $(hcl .shape.node_class)"
		if [ "$(j '.shape.gpu_count')" -gt 0 ]; then
			echo "  simulated_gpu {"
			echo "    count = $(j '.shape.gpu_count')"
			[ -n "$(j '.shape.gpu_model')" ] && echo "    model = $(hcl .shape.gpu_model)"
			[ "$(j '.shape.gpu_memory_mb')" -gt 0 ] && echo "    memory = $(j '.shape.gpu_memory_mb')"
			echo "  }"
		fi
		echo "}"
	} > "$dir/agent.hcl"
	# setsid: the agent leaves the provider call's process group, which is
	# killed when the call ends.
	setsid "$bin" agent -client -config "$dir/agent.hcl" > "$dir/agent.log" 2>&1 < /dev/null &
	echo $! > "$dir/pid"
	printf '%s' "$in" | jq --arg id "$id" '{id: $id, pool, idempotency_key, node_name, state: "running"}' > "$dir/host.json"
	jq '{id, node_name, state}' "$dir/host.json"
	;;
terminate)
	id=$(j .id)
	case "$id" in local-*) ;; *) echo "{}"; exit 0 ;; esac
	dir="$state/$id"
	if [ -f "$dir/pid" ]; then
		pid=$(cat "$dir/pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
	echo "{}"
	;;
list)
	{
		for f in "$state"/local-*/host.json; do
			[ -f "$f" ] && cat "$f"
		done
	} | jq -s --arg pool "$pool" '{hosts: [.[] | select($pool == "" or .pool == $pool)]}'
	;;
*)
	echo "unknown op $op" >&2
	exit 2
	;;
esac
