#!/bin/sh
# Build the runner's image offline, the way the tests do: local Debian 12
# bases made by debootstrap (packaging/rootfs.sh), imported into a private
# dockerd (dockerd.sh), then `docker build` of packaging/container/Dockerfile
# with those bases.  Run it from anywhere, as root.
#
#   packaging/container/build-image.sh [--offline] [--keep-dockerd] [TAG]
#
# TAG defaults to runner:<VERSION>.  --offline does not run rootfs.sh (the
# one step that fetches packages from Debian's mirror) and fails if the
# bases are not made yet; the tests use it.  dockerd is stopped at the end
# unless it was already running or --keep-dockerd is given; then
# `DOCKER_HOST=$(packaging/container/dockerd.sh host) docker ...` reaches it.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
offline=false
keep=false
tag=""
for a in "$@"; do
	case "$a" in
	--offline) offline=true ;;
	--keep-dockerd) keep=true ;;
	-*) echo "build-image.sh: unknown option '$a'" >&2; exit 2 ;;
	*) tag=$a ;;
	esac
done
[ -n "$tag" ] || tag="runner:$(cat "$top/VERSION")"
rootfs="$top/build/rootfs"
ctr="$top/packaging/container"

if ! $offline; then
	"$top/packaging/rootfs.sh" build "$rootfs/build"
	"$top/packaging/rootfs.sh" runtime "$rootfs/runtime"
fi
for v in build runtime; do
	if [ ! -f "$rootfs/$v/.rootfs-stamp" ]; then
		echo "build-image.sh: no base $rootfs/$v: run make rootfs (or this script without --offline)" >&2
		exit 1
	fi
done

DOCKER_HOST=$("$ctr/dockerd.sh" host)
export DOCKER_HOST
export DOCKER_BUILDKIT=0	# the classic builder: no BuildKit, no network
was_running=false
docker version >/dev/null 2>&1 && was_running=true
"$ctr/dockerd.sh" start
if ! $keep && ! $was_running; then
	trap '"$ctr/dockerd.sh" stop' EXIT
fi

# Import a base again only when its tree changed (rootfs.sh rewrites it
# whole, so the stamp and the directory's time tell).
import_base() {
	v=$1 name="runner-base-$1:bookworm"
	mark="$top/build/docker/base-$v.imported"
	want="$(cat "$rootfs/$v/.rootfs-stamp") $(stat -c %Y "$rootfs/$v")"
	if docker image inspect "$name" >/dev/null 2>&1 && [ -f "$mark" ] &&
	    [ "$(cat "$mark")" = "$want" ]; then
		return 0
	fi
	echo "build-image.sh: importing $rootfs/$v as $name" >&2
	tar -C "$rootfs/$v" --exclude=./proc --exclude=./sys --exclude=./dev -c . |
	    docker import - "$name" >/dev/null
	printf '%s\n' "$want" >"$mark"
}
import_base build
import_base runtime

revision=$(git -C "$top" rev-parse --short=8 HEAD 2>/dev/null || echo unknown)
docker build -q -f "$ctr/Dockerfile" -t "$tag" \
	--build-arg BUILD_BASE=runner-base-build:bookworm \
	--build-arg RUNTIME_BASE=runner-base-runtime:bookworm \
	--build-arg REVISION="$revision" "$top" >/dev/null
# The images a rebuild replaced (and their build stages) would pile up in
# build/docker run after run.
docker image prune -f >/dev/null
echo "build-image.sh: built $tag" >&2
