#!/bin/sh
# Install the Debian packages that building, testing and running the demo
# need.  Idempotent: when every package is already present it asks dpkg once
# and exits without touching apt, so `make` stays fast on a ready machine.
set -eu

PKGS="
build-essential
pkg-config
libcurl4-openssl-dev
libuv1-dev
libcjson-dev
zlib1g-dev
libarchive-dev
zip
unzip
libcmocka-dev
libssl-dev
openssl
clang
libclang-rt-14-dev
python3
python3-pytest
git
valgrind
strace
nginx-light
gnuplot-nox
debootstrap
debhelper
fakeroot
lintian
docker.io
busybox-static
podman
docker-registry
apache2-utils
python3-yaml
systemd
"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done

[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
else
	SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
