#!/bin/bash
# The image's HEALTHCHECK: GET /health/live on the runner's listen address
# with bash's /dev/tcp, so the image needs no curl.  RUNNER_HEALTH_ADDRESS
# must name the port `run --listen-address` uses (the image's CMD uses the
# default, 9252); a wildcard listener is reached on loopback.
addr=${RUNNER_HEALTH_ADDRESS:-127.0.0.1:9252}
host=${addr%:*}
port=${addr##*:}
case $host in ''|0.0.0.0) host=127.0.0.1 ;; '[::]') host=::1 ;; esac
host=${host#[}
host=${host%]}

exec 3<>"/dev/tcp/$host/$port" || exit 1
printf 'GET /health/live HTTP/1.0\r\nHost: %s\r\n\r\n' "$addr" >&3
IFS= read -r -t 5 status <&3 || exit 1
case $status in
"HTTP/1."?" 200 "*) exit 0 ;;
esac
echo "health: ${status%$'\r'}" >&2
exit 1
