#!/bin/sh
# deps.sh — installs the Debian/Ubuntu packages that the build, the tests and the demo need.
# Run as root (CI, a container's root shell): `sh .ci/deps.sh`; as another user it runs itself
# again through sudo. Safe to run again.
# nvcc is not installed here: the Makefile builds the GPU engine only when it finds nvcc
# (on PATH or under /usr/local/cuda), and the CPU-only build otherwise.
# slurm-wlm (slurmctld, slurmd, the clients) and munge are for `make test-slurm`, which starts
# them itself, as the test configures them, in a temporary directory (not through /etc/slurm);
# libpmix-dev gives libpmix.so, which SLURM's mpi/pmix plugin loads for `srun --mpi=pmix`.
set -eu

if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo sh "$0" "$@"
    fi
    echo "deps.sh: run as root (there is no sudo here)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
    build-essential pkg-config \
    openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools \
    libpng-dev libcmocka-dev man-db libopencv-dev libdeflate-dev libisal-dev libaec-dev zlib1g-dev gdb \
    python3 python3-numpy python3-h5py python3-pil python3-pytest python3-opencv python3-skimage \
    slurm-wlm munge libpmix-dev
