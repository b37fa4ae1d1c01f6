#!/bin/sh
# A provider program that hangs past any deadline, with a child in its
# process group (whose pid it records in config.state_dir) that must die
# with it.
in=$(cat)
dir=$(printf '%s' "$in" | sed -n 's/.*"state_dir":"\([^"]*\)".*/\1/p')
sleep 300 &
echo $! > "$dir/child.pid"
echo "creating a host, this takes a while" >&2
sleep 300
