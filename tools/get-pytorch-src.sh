#!/usr/bin/env bash
# Fetch a real PyTorch source release (Debian's dfsg tarball: the upstream tree minus some bundled
# third_party code), verify it against the signed .dsc, and unpack it once into a cache folder.
#   usage: tools/get-pytorch-src.sh [--debian-patches] VERSION [CACHE_DIR]
#          VERSION: 2.6.0 (Debian trixie), 1.13.1 (bookworm)
# Prints the path of the unpacked tree on stdout; everything else goes to stderr.
# --debian-patches: the path of Debian's own quilt series for that tree (debian/patches of the
# same source package: a real vendor patch series, used by the tests of `tdev patch`).
# Needs root (apt) the first time. Uses the machine's apt configuration; adds a deb-src entry once.
set -euo pipefail
want=tree
if [[ ${1:-} == --debian-patches ]]; then want=patches; shift; fi
version=${1:?usage: get-pytorch-src.sh [--debian-patches] VERSION [CACHE_DIR]}
cache=${2:-${XDG_CACHE_HOME:-$HOME/.cache}/pytorch-src}
case $version in
  2.6.0)  deb=2.6.0+dfsg-7;  suite=trixie ;;
  1.13.1) deb=1.13.1+dfsg-4; suite=bookworm ;;
  *) echo "get-pytorch-src.sh: no known source package for PyTorch $version (known: 2.6.0, 1.13.1)" >&2; exit 2 ;;
esac
tree=$cache/pytorch-$version
[[ $want == patches ]] && tree=$cache/pytorch-$version-debian-patches
# the tarball's owner (uid 1001) must not stick: git refuses a tree of another owner ("dubious
# ownership"), which `tdev extract --in-tree` and `tdev patch new` need on copies
own() { [[ $(stat -c %u "$1") == "$(id -u)" ]] || chown -R "$(id -u):$(id -g)" "$1"; }
if [[ -f $tree/.complete ]]; then own "$tree"; echo "$tree"; exit 0; fi
mkdir -p "$cache"
src=/etc/apt/sources.list.d/pytorch-src.sources
if ! grep -qs "Suites:.*$suite" "$src"; then
  uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n $uri ]] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $uri ]] || { echo "get-pytorch-src.sh: cannot find the Debian archive in apt's sources" >&2; exit 1; }
  suites="bookworm trixie"
  printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" "$suites" > "$src"
  apt-get update -qq >&2
fi
work=$(mktemp -d "$cache/.dl.XXXXXX")
trap 'rm -rf "$work"' EXIT
# only the .dsc and the upstream tarball are needed; a missing debian.tar.xz is not fatal
(cd "$work" && apt-get source -qq -d "pytorch=$deb" >&2 2>&1 || true)
# verify a downloaded file against the checksum in the signed .dsc when there is one
verify() {
  local dsc expect got
  dsc=$(ls "$work"/*.dsc 2>/dev/null | head -1 || true)
  [[ -n $dsc ]] || return 0
  expect=$(awk -v f="$(basename "$1")" '/^Checksums-Sha256:/{s=1;next} /^[^ ]/{s=0} s && $3==f {print $1}' "$dsc")
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [[ -z $expect || $expect == "$got" ]] || { echo "get-pytorch-src.sh: checksum mismatch for $1" >&2; exit 1; }
}
if [[ $want == patches ]]; then
  dtar=$(ls "$work"/pytorch_*.debian.tar.xz 2>/dev/null | head -1)
  [[ -n $dtar ]] || { echo "get-pytorch-src.sh: no debian.tar.xz for pytorch=$deb" >&2; exit 1; }
  verify "$dtar"
  mkdir -p "$work/d" && tar --no-same-owner -xf "$dtar" -C "$work/d"
  [[ -f $work/d/debian/patches/series ]] || { echo "get-pytorch-src.sh: $dtar has no debian/patches/series" >&2; exit 1; }
  rm -rf "$tree" && mv "$work/d/debian/patches" "$tree" && touch "$tree/.complete"
  echo "$tree"
  exit 0
fi
orig=$(ls "$work"/pytorch_*.orig.tar.xz 2>/dev/null | head -1)
[[ -n $orig ]] || { echo "get-pytorch-src.sh: download of pytorch=$deb failed" >&2; exit 1; }
verify "$orig"
mkdir -p "$work/x" && tar --no-same-owner -xf "$orig" -C "$work/x"
top=$(ls -d "$work"/x/*/ | head -1)
rm -rf "$tree" && mv "$top" "$tree" && touch "$tree/.complete"
echo "$tree"
