#!/usr/bin/env bash
# Install the Debian packages a part of hpml needs:
#   scripts/install-deps.sh          building, testing and running the demo (make test)
#   scripts/install-deps.sh --fuzz   make fuzz: clang with its libFuzzer and sanitizer
#                                    runtimes (Debian 12: clang-14, libclang-rt-14-dev)
#   scripts/install-deps.sh --torch  PyTorch (python3-torch), for hpml.torch's
#                                    tests/cli/torch.sh and bench/run_torch_bench.sh, and
#                                    for bench/npz_torch_check.sh
#   scripts/install-deps.sh --dask   bench/dask_mpi.sh: pandas, for its dataframe merge
# Idempotent: does nothing when everything is present, runs `apt-get update` only when
# something is missing. Tools only one script or target uses (python3-torch for a
# benchmark, clang for fuzzing) are not in the base set.
set -euo pipefail

case "${1:-}" in
"")
    packages=(
        make gcc pkg-config
        openmpi-bin libopenmpi-dev
        mpich libmpich-dev
        libopenblas-dev liblapacke-dev
        libcmocka-dev zlib1g-dev
        dataset-fashion-mnist
        python3 python3-numpy python3-sklearn python3-jsonschema
        python3-mpi4py python3-pytest python3-cffi python3-dev
        python3-distributed
        gnuplot-nox
        clang-format
    )
    ;;
--fuzz) packages=(clang libclang-rt-14-dev) ;;
--torch) packages=(python3-torch python3-numpy python3-mpi4py python3-cffi python3-pytest) ;;
--dask) packages=(python3-distributed python3-pandas) ;;
*)
    echo "install-deps: unknown option '$1' (none, --fuzz, --torch or --dask)" >&2
    exit 2
    ;;
esac

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
