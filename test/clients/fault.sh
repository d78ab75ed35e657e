#!/usr/bin/env bash
# fault.sh CPORT COMMAND: send one command (hold, cut, heal, drop, status) to the fault proxy
# listening for commands on 127.0.0.1:CPORT (test/clients/faultproxy.py); prints its answer and
# exits 0 only when the answer starts with "ok".
set -u
[ $# -eq 2 ] || { echo "usage: fault.sh CPORT hold|cut|heal|drop|status" >&2; exit 2; }
exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
printf '%s\n' "$2" >&3
IFS= read -r -t 10 reply <&3 || { echo "no answer from the fault proxy on port $1" >&2; exit 1; }
exec 3<&-
echo "$reply"
[[ $reply == ok* ]]
