#!/bin/sh
# Make a Debian 12 root file system with debootstrap: the "fresh machine" that
# the packaging tests install the .deb into, and the local base images of the
# container build (no registry is reachable from the tests).
#
#   packaging/rootfs.sh runtime DIR   minbase + what the runner needs to run
#   packaging/rootfs.sh build DIR     runtime + what it needs to be built
#
# This is an install step, like install-deps.sh: it is the only part that
# fetches packages (from Debian's mirror); the tests that use DIR stay on
# loopback.  DIR is reused while its stamp (the package list) is unchanged, so
# a second `make test` costs nothing.  Written to DIR.tmp, then renamed: a
# half-made tree is never taken for a whole one.
set -eu

variant=${1:?usage: rootfs.sh runtime|build DIR}
dir=${2:?usage: rootfs.sh runtime|build DIR}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# What the runner links against and calls at run time (dpkg-shlibdeps names the
# libraries; git, bash and ca-certificates are what jobs and the runner use).
runtime="bash,ca-certificates,git,passwd,tini,adduser,procps,systemd,init-system-helpers,libcurl4,libuv1,libcjson1,libarchive13,zlib1g,libssl3"
build="build-essential,pkg-config,libcurl4-openssl-dev,libuv1-dev,libcjson-dev,zlib1g-dev,libarchive-dev,libssl-dev,debhelper,fakeroot"

case "$variant" in
runtime) include=$runtime ;;
build) include="$runtime,$build" ;;
*) echo "rootfs.sh: unknown variant '$variant' (runtime or build)" >&2; exit 2 ;;
esac

stamp="bookworm minbase $include"
if [ -f "$dir/.rootfs-stamp" ] && [ "$(cat "$dir/.rootfs-stamp")" = "$stamp" ]; then
	exit 0
fi

echo "rootfs.sh: debootstrap $variant into $dir" >&2
rm -rf "$dir" "$dir.tmp"
mkdir -p "$(dirname "$dir")"
log="$dir.log"
if ! debootstrap --variant=minbase --include="$include" bookworm "$dir.tmp" "$mirror" >"$log" 2>&1; then
	tail -20 "$log" >&2
	echo "rootfs.sh: debootstrap of $variant failed; the whole log is $log" >&2
	exit 1
fi
# apt's lists and archives are not needed offline and double the size.
rm -rf "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/lib/apt/lists/*_Packages
printf '%s\n' "$stamp" >"$dir.tmp/.rootfs-stamp"
mv "$dir.tmp" "$dir"
