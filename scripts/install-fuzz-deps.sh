#!/usr/bin/env bash
# Install the Debian packages that `make fuzz` needs and nothing else: clang with its
# libFuzzer and sanitizer runtimes (Debian 12: clang-14, libclang-rt-14-dev). Only the
# fuzzing uses them, so `make test`'s scripts/install-deps.sh does not install them.
# Idempotent: does nothing when they are present, runs `apt-get update` only when
# something is missing.
set -euo pipefail

packages=(clang libclang-rt-14-dev)

missing=()
for p in "${packages[@]}"; do
    # dpkg-query prints "install ok installed" only for a fully installed package.
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-fuzz-deps: all ${#packages[@]} packages present"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-fuzz-deps: missing packages: ${missing[*]}" >&2
    echo "install-fuzz-deps: run as root (or: sudo $0) to install them" >&2
    exit 1
fi

echo "install-fuzz-deps: installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q >&2; then
    echo "install-fuzz-deps: 'apt-get update' failed: is the package mirror reachable (offline?)" >&2
    exit 1
fi
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
    echo "install-fuzz-deps: 'apt-get install' failed for: ${missing[*]}" >&2
    exit 1
fi
echo "install-fuzz-deps: done"
