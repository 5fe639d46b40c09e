#!/usr/bin/env bash
# tcmalloc for the CPU engine (20-27% faster here; engine/app/console/preload.py preloads it when present).
# Installed with apt-get where this user may (root, Debian/Ubuntu), and never silently: the command is
# announced on one line first. NO_APT=1 skips apt-get and says so; otherwise, where apt-get cannot run,
# a note says how to get the speed-up. scripts/install.sh runs this for the CPU build.
set -uo pipefail
PKG=libtcmalloc-minimal4
ls /usr/lib/*/libtcmalloc_minimal.so.4 /usr/lib64/libtcmalloc_minimal.so.4 >/dev/null 2>&1 && exit 0
if [ "${NO_APT:-}" = 1 ]; then
  echo "litjudge: NO_APT=1: skipped apt-get install $PKG (tcmalloc makes the CPU engine ~20% faster; install it yourself to use it)" >&2
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "litjudge: running apt-get install $PKG (and apt-get update if the package is not found): tcmalloc makes the CPU engine ~20% faster; NO_APT=1 skips this" >&2
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$PKG" >/dev/null 2>&1 \
    || (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$PKG" >/dev/null 2>&1)) \
    || echo "litjudge: note: could not install $PKG" >&2
else
  echo "litjudge: note: $PKG (Debian/Ubuntu) makes the CPU engine ~20% faster; install it to use it" >&2
fi
exit 0
