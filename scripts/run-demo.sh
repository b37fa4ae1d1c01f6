#!/usr/bin/env bash
# run-demo: what `make run` does. Start `gpulayer agent -dev` on an empty data
# dir, run examples/hello-gpu.hcl to completion, print its logs and its
# status, then stop the agent.
#
#   make run                  # HTTP API on 127.0.0.1:4656, Raft on 4657
#   make run DEMO_PORT=5656   # HTTP API on 5656, Raft on 5657
#
# Environment (the GNUmakefile sets it): BIN, the gpulayer binary (default
# bin/gpulayer); DEMO_DIR, the data dir, emptied first (default .data/demo);
# DEMO_PORT, the agent's HTTP port (default 4656); the Raft port is the next
# one. The agent's log is DEMO_DIR/agent.log. Needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-bin/gpulayer}
dir=${DEMO_DIR:-$PWD/.data/demo}
port=${DEMO_PORT:-4656}
log=$dir/agent.log

fail() {
  echo "make run: $*" >&2
  exit 1
}

[[ $port =~ ^[0-9]+$ ]] && ((port >= 1 && port <= 65534)) ||
  fail "DEMO_PORT=$port is not a port number from 1 to 65534 (the Raft port is DEMO_PORT+1)"
raft_port=$((port + 1))
addr=http://127.0.0.1:$port

# in_use reports whether something accepts connections on 127.0.0.1:$1
# (an agent binds its ports on 127.0.0.1 in dev mode; a listener on 0.0.0.0
# answers there too).
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

for p in "$port" "$raft_port"; do
  if in_use "$p"; then
    what="the agent's HTTP API"
    [[ $p == "$raft_port" ]] && what="the agent's Raft port, DEMO_PORT+1"
    holder=""
    if command -v ss >/dev/null; then
      # users:(("python3",pid=31685,fd=3)) -> python3, pid 31685
      holder=$(ss -Hltnp "sport = :$p" 2>/dev/null |
        sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1, pid \2/p' | head -n 1 || true)
    fi
    echo "make run: port $p on 127.0.0.1 ($what) is already in use${holder:+ ($holder)}." >&2
    fail "Is another agent running? Stop it, or pick free ports:" \
      "make run DEMO_PORT=$((port + 1000)) (HTTP API on $((port + 1000)), Raft on $((port + 1001)))."
  fi
done

# blocked_for_others prints the first directory above $1 that other users
# cannot enter (no o+x), or nothing.
blocked_for_others() {
  local d
  d=$(dirname "$1")
  while [[ $d != / && -n $d ]]; do
    if [[ -d $d ]] && [[ $(stat -c %A "$d") != *x ]] && [[ $(stat -c %A "$d") != *t ]]; then
      echo "$d"
      return
    fi
    d=$(dirname "$d")
  done
}

# A root agent runs native tasks as nobody, who must be able to enter the
# data dir: a checkout under /root (mode 0700) cannot hold it.
if [[ $(id -u) == 0 ]]; then
  if blocked=$(blocked_for_others "$dir") && [[ -n $blocked ]]; then
    tmp=${TMPDIR:-/tmp}/gpulayer-demo-$port
    echo "make run: as root, tasks run as nobody, who cannot enter $blocked; using $tmp as the data dir." >&2
    dir=$tmp
    log=$dir/agent.log
  fi
fi

rm -rf "$dir"
mkdir -p "$dir"
"$bin" agent -dev -data-dir="$dir" -http-port="$port" -raft-port="$raft_port" >"$log" 2>&1 &
agent=$!

# show_log prints the end of the agent's log on stderr.
show_log() {
  echo "==> last lines of $log:" >&2
  tail -n 20 "$log" >&2 || true
}

on_exit() {
  local rc=$?
  kill "$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true
  if ((rc != 0)); then
    echo "==> make run failed (exit $rc); the agent's log is $log" >&2
  fi
}
trap on_exit EXIT

up=false
for _ in $(seq 1 300); do
  if ! kill -0 "$agent" 2>/dev/null; then
    wait "$agent" && rc=0 || rc=$?
    echo "make run: the agent exited during start-up (exit $rc)" >&2
    show_log
    exit 1
  fi
  if curl -fsS "$addr/v1/status/health" >/dev/null 2>&1; then
    up=true
    break
  fi
  sleep 0.1
done
if ! $up; then
  echo "make run: the agent did not answer on $addr/v1/status/health within 30s" >&2
  show_log
  exit 1
fi
echo "==> agent -dev is up on $addr (log: $log)"

"$bin" job run -address="$addr" examples/hello-gpu.hcl
echo "==> logs of hello-gpu:"
"$bin" alloc logs -address="$addr" -f -job hello-gpu
for _ in $(seq 1 100); do
  [[ $("$bin" job status -address="$addr" -json hello-gpu) == *'"Status": "dead"'* ]] && break
  sleep 0.1
done
"$bin" job status -address="$addr" hello-gpu
