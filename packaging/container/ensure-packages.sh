#!/bin/sh
# Install the Debian packages named on the command line that are not
# installed yet.  The image build runs it in both stages so that one
# Dockerfile serves two bases: debian:bookworm from a registry (it installs
# what is missing, online) and the local debootstrap bases of the tests
# (everything is there; apt is never called, so no network is needed).
# dpkg-query comes first because apt-get without package lists fails even
# for a package that is installed.
set -eu

missing=""
for p in "$@"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "ensure-packages: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
rm -rf /var/lib/apt/lists/*
