#!/bin/sh
# `make deb`: build the Debian package from a staged copy of the tree.
#
#   packaging/debian/make-deb.sh DEB_VERSION OUTDIR
#
# The tracked and untracked-but-not-ignored files (as they are in the work
# tree, so uncommitted edits are built) are copied to
# OUTDIR/runner-DEB_VERSION, packaging/debian becomes its debian/, the unit
# packaging/systemd/runner.service becomes debian/runner.service (for
# dh_installsystemd), and debian/changelog is written with DEB_VERSION, so
# a test can build a second, higher version without touching the tree.
# dpkg-buildpackage then leaves runner_DEB_VERSION_ARCH.deb in OUTDIR.
set -eu

version=${1:?usage: make-deb.sh DEB_VERSION OUTDIR}
out=${2:?usage: make-deb.sh DEB_VERSION OUTDIR}
case "$version" in
*-*) ;;
*) echo "make-deb.sh: DEB_VERSION '$version' has no Debian revision (e.g. $version-1)" >&2; exit 2 ;;
esac

top=$(git rev-parse --show-toplevel)
cd "$top"
mkdir -p "$out"
out=$(cd "$out" && pwd)
src="$out/runner-$version"
rm -rf "$src"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$src"
cp -r packaging/debian "$src/debian"
cp packaging/systemd/runner.service "$src/debian/runner.service"
rm -f "$src/debian/make-deb.sh"

rev=$(git rev-parse --short=8 HEAD)
echo "$rev" >"$src/debian/REVISION"
maintainer=$(sed -n 's/^Maintainer: //p' packaging/debian/control)
# The commit's date, not now: the same commit builds the same package.
cat >"$src/debian/changelog" <<CHANGELOG
runner ($version) unstable; urgency=medium

  * Built by make deb from revision $rev.

 -- $maintainer  $(git log -1 --format=%aD HEAD)
CHANGELOG

cd "$src"
dpkg-buildpackage -b -us -uc -jauto >"$out/build-$version.log" 2>&1 || {
	tail -30 "$out/build-$version.log" >&2
	echo "make-deb.sh: dpkg-buildpackage failed; the whole log is $out/build-$version.log" >&2
	exit 1
}
deb="$out/runner_${version}_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || { echo "make-deb.sh: $deb was not made" >&2; exit 1; }
echo "$deb"
