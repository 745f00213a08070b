#!/usr/bin/env bash
# Builds kubequota's container image from the Dockerfile at the repository root.
#
#   scripts/image.sh [IMAGE]        (`make image [IMAGE=repo/kubequota:tag]`)
#
# IMAGE defaults to kubequota:<chart appVersion>. The builder is chosen in this order:
#   1. docker build, when a Docker daemon answers (`docker info`);
#   2. otherwise buildah (Debian's package, installed with apt-get when missing), rootless-
#      friendly: `buildah bud --isolation chroot` on vfs storage, so it needs neither a
#      daemon, nor overlayfs, nor user namespaces.
# The Dockerfile starts FROM debian:bookworm and debian:bookworm-slim. With buildah, when
# those cannot be pulled (no container registry reachable, as on the project's machines),
# they are bootstrapped from Debian's package archive with debootstrap (minbase variant,
# the archive and keyring apt already uses) and stored under those names, so the image
# builds on a machine that reaches only Debian's packages. The bootstrapped root file
# system is cached in ${XDG_CACHE_HOME:-$HOME/.cache}/kubequota/image/.
#
# Environment: KQ_IMAGE_BUILDER=docker|buildah forces a builder; KQ_IMAGE_BOOTSTRAP=1
# bootstraps the bases even when a registry could serve them.
# With buildah the image lands in buildah's (vfs) storage: `buildah push IMAGE` sends it to
# a registry, `buildah push IMAGE docker-archive:kubequota.tar` writes a tarball.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' charts/kubequota/Chart.yaml)
image=${1:-${IMAGE:-kubequota:${version:-dev}}}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kubequota/image
suite=bookworm

say() { echo "image: $*" >&2; }
die() { echo "image: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "need root to run: $*"
  fi
}

builder=${KQ_IMAGE_BUILDER:-}
if [ -z "$builder" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then builder=docker
  else builder=buildah
  fi
fi

# The build context has no .git (.dockerignore): hand the commit and its date to make.
version_args=(--build-arg "KQ_COMMIT=$(git -C "$top" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
              --build-arg "KQ_BUILD_DATE=$(TZ=UTC git -C "$top" log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo unknown)")

if [ "$builder" = docker ]; then
  say "building $image with docker"
  exec docker build "${version_args[@]}" -t "$image" "$top"
fi
[ "$builder" = buildah ] || die "KQ_IMAGE_BUILDER=$builder: expected docker or buildah"

need=()
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]} from Debian's packages"
  as_root apt-get update -q >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${need[@]}" >/dev/null
fi

# vfs: plain directory copies, works inside containers and without kernel overlay support.
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
bah() { buildah --storage-driver vfs "$@"; }

have_image() { bah inspect --type image "$1" >/dev/null 2>&1; }

# The archive apt uses on this machine (deb822 or one-line sources; scripts/apt-source.sh):
# debootstrap fetches from the same mirror, whichever it is.
mirror() {
  bash "$top/scripts/apt-source.sh" mirror
}

# Makes docker.io/library/debian:bookworm and :bookworm-slim from a debootstrap root file
# system (the same minimal system under both names: the build stage installs what it needs).
bootstrap_bases() {
  local tarball=$cache/debian-$suite-minbase.tar rootfs ctr mnt
  mkdir -p "$cache"
  if [ ! -s "$tarball" ]; then
    rootfs=$(mktemp -d "$cache/.rootfs.XXXXXX")
    say "bootstrapping debian:$suite from $(mirror) with debootstrap (cached in $tarball)"
    if ! as_root debootstrap --variant=minbase --include=ca-certificates "$suite" "$rootfs" "$(mirror)" \
         >"$cache/debootstrap.log" 2>&1; then
      tail -n 20 "$cache/debootstrap.log" >&2
      as_root rm -rf "$rootfs"
      die "debootstrap failed (log: $cache/debootstrap.log)"
    fi
    # what the official image does: no caches, no leftover apt lists
    as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    as_root tar -C "$rootfs" --numeric-owner -cf "$tarball.tmp" .
    as_root rm -rf "$rootfs"
    mv -f "$tarball.tmp" "$tarball"
  fi
  ctr=$(bah from scratch)
  mnt=$(bah mount "$ctr")
  tar -C "$mnt" --numeric-owner -xf "$tarball"
  bah umount "$ctr" >/dev/null
  bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash "$ctr"
  bah commit --quiet --rm "$ctr" "docker.io/library/debian:$suite" >/dev/null
  bah tag "docker.io/library/debian:$suite" "docker.io/library/debian:$suite-slim"
  say "debian:$suite and debian:$suite-slim bootstrapped"
}

bases_ok=1
for b in "docker.io/library/debian:$suite" "docker.io/library/debian:$suite-slim"; do
  have_image "$b" || bases_ok=0
done
if [ "$bases_ok" = 0 ]; then
  if [ "${KQ_IMAGE_BOOTSTRAP:-0}" != 1 ] &&
     timeout 60 buildah --storage-driver vfs pull --quiet "docker.io/library/debian:$suite" >/dev/null 2>&1 &&
     timeout 60 buildah --storage-driver vfs pull --quiet "docker.io/library/debian:$suite-slim" >/dev/null 2>&1; then
    say "pulled debian:$suite and debian:$suite-slim"
  else
    say "debian:$suite cannot be pulled from a registry; bootstrapping it from Debian's archive"
    bootstrap_bases
  fi
fi

say "building $image with buildah (isolation chroot, vfs storage)"
# --pull=never: the bases are local now (pulled or bootstrapped); never reach for a registry.
bah bud --isolation chroot --pull=never --layers=false "${version_args[@]}" -f Dockerfile -t "$image" "$top"
say "built $image (buildah images --storage-driver vfs; buildah push $image [DESTINATION])"
