#!/bin/sh
# A private dockerd for the image build and its tests: state, socket and log
# under DIR (default build/docker of the repository), no bridge and no
# iptables rules (containers use --network host), so it changes nothing on
# the machine outside DIR and touches no network.
#
#   packaging/container/dockerd.sh start [DIR]   start it unless it answers already
#   packaging/container/dockerd.sh stop [DIR]    stop it and wait for the exit
#   packaging/container/dockerd.sh host [DIR]    print its DOCKER_HOST
#
# Needs root (dockerd does).  Uses the docker client on PATH.
set -eu

cmd=${1:?usage: dockerd.sh start|stop|host [DIR]}
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=${2:-$top/build/docker}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
sock="$dir/docker.sock"
pidfile="$dir/dockerd.pid"
host="unix://$sock"

answers() {
	DOCKER_HOST=$host docker version >/dev/null 2>&1
}

case "$cmd" in
host)
	echo "$host"
	;;
start)
	if answers; then
		exit 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "dockerd.sh: dockerd needs root" >&2
		exit 1
	fi
	command -v dockerd >/dev/null || { echo "dockerd.sh: dockerd is not installed (docker.io)" >&2; exit 1; }
	# A short exec root (containerd's socket path must fit in 108 bytes),
	# one per DIR.
	exec_root=/tmp/runner-dockerd-$(echo "$dir" | cksum | cut -d' ' -f1)
	nohup dockerd --bridge=none --iptables=false --ip6tables=false \
		--data-root "$dir/data" --exec-root "$exec_root" \
		--host "$host" --pidfile "$pidfile" >"$dir/dockerd.log" 2>&1 </dev/null &
	pid=$!
	# dockerd takes a few seconds to answer; give up after a minute.
	i=0
	until answers; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -20 "$dir/dockerd.log" >&2
			echo "dockerd.sh: dockerd exited; the log is $dir/dockerd.log" >&2
			exit 1
		fi
		i=$((i + 1))
		if [ "$i" -gt 600 ]; then
			tail -20 "$dir/dockerd.log" >&2
			echo "dockerd.sh: dockerd does not answer on $sock after 60 s" >&2
			exit 1
		fi
		sleep 0.1
	done
	;;
stop)
	[ -f "$pidfile" ] || exit 0
	pid=$(cat "$pidfile")
	# A pid file left by a crash may name someone else's process by now.
	if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] && kill "$pid"; then
		# dockerd stops its containers (up to their stop timeouts) first.
		while kill -0 "$pid" 2>/dev/null; do
			sleep 0.1
		done
	fi
	rm -f "$pidfile"
	;;
*)
	echo "dockerd.sh: unknown command '$cmd' (start, stop or host)" >&2
	exit 2
	;;
esac
