#!/usr/bin/env bash
# Install every Debian package that building, testing and running the demo of hpml need.
# Idempotent: does nothing when everything is present, runs `apt-get update` only when
# something is missing. Heavy benchmark-only tools (python3-torch) are not installed here.
set -euo pipefail

packages=(
    make gcc pkg-config
    openmpi-bin libopenmpi-dev
    mpich libmpich-dev
    libopenblas-dev liblapacke-dev
    libcmocka-dev zlib1g-dev
    dataset-fashion-mnist
    python3 python3-numpy python3-sklearn
    gnuplot-nox
    clang-format
)

missing=()
for p in "${packages[@]}"; do
    # dpkg-query prints "install ok installed" only for a fully installed package.
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run as root (or: sudo $0) to install them" >&2
    exit 1
fi

echo "install-deps: installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q >&2; then
    echo "install-deps: 'apt-get update' failed: is the package mirror reachable (offline?)" >&2
    exit 1
fi
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
    echo "install-deps: 'apt-get install' failed for: ${missing[*]}" >&2
    exit 1
fi
echo "install-deps: done"
