#!/bin/sh
# A provider program that prints far more than 1 MiB on stdout, then
# hangs: it must be killed when the limit is passed, not at the deadline.
cat >/dev/null
head -c 3000000 /dev/zero | tr '\0' 'x'
sleep 300
