#!/bin/sh
# Make a Debian base image for the Dockerfile's BASE build argument on a machine that has
# podman and Debian's packages but no registry (docs/how-to/production.md#building-without-a-registry):
# debootstrap a minimal Debian with python3 and its venv module, keep it as a tarball in a cache
# directory outside the repository, and import it into podman as IMAGE.
#
#   deploy/docker/make-base-image.sh [IMAGE]     (default localhost/cronoq-base:bookworm)
#
# Environment: CRONOQ_BASE_CACHE (default /var/cache/cronoq-images), SUITE (bookworm),
# DEBIAN_MIRROR (http://deb.debian.org/debian). Needs root, debootstrap and podman. Nothing is
# done when IMAGE exists; the first run takes about two minutes (debootstrap downloads ~40 MB),
# a run with the tarball cached about ten seconds (the import).
set -eu
image=${1:-localhost/cronoq-base:bookworm}
cache=${CRONOQ_BASE_CACHE:-/var/cache/cronoq-images}
suite=${SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
tarball="$cache/$suite-python3.tar"

if podman image exists "$image"; then
    exit 0
fi
mkdir -p "$cache"
if [ ! -f "$tarball" ]; then
    root=$(mktemp -d "$cache/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase --include=python3,python3-venv "$suite" "$root" "$mirror"
    # the package cache and lists are not needed in the image
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
fi
podman import --change 'CMD ["/bin/sh"]' "$tarball" "$image"
