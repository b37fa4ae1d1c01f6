#!/bin/sh
# A provider program whose cloud refuses: it exits 1 with a message.
cat >/dev/null
echo "starting $1" >&2
echo "error: quota exceeded for instance type gpu-1 in region lab-1" >&2
exit 1
