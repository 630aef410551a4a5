#!/bin/sh
# make_devdeps.sh — assembles .devdeps/, what a GPU machine's calls carry (carry [".devdeps"]), from
# this machine's Debian packages. The GPU image (Ubuntu 24.04) has serial HDF5 only, libpng without
# headers, and neither libdeflate nor ISA-L nor OpenCV's C++ library; bench/device/env.sh points the
# build there at what this puts in:
#   phdf5/    Debian's Open MPI build of HDF5, with the szip/aec libraries it links
#   png/      libpng's headers (png/include)
#   deflate/  libdeflate, isal/ ISA-L (runtime and headers, unpacked as dpkg -x does)
# With --clahe-bench also bin/clahe_gpu_bench (bench/clahe_gpu_bench.cu, built here from the tree's
# objects against Debian's OpenCV) and the OpenCV libraries it loads, in opencv/.
# Run from the repository root after `make deps` (and `make` for --clahe-bench); needs apt-get.
# Usage: sh bench/device/make_devdeps.sh [--clahe-bench] [DIR]   (default DIR: .devdeps)
set -eu
clahe=0
[ "${1:-}" = --clahe-bench ] && { clahe=1; shift; }
dir=${1:-.devdeps}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# unpack DEST PACKAGE...: the packages' files under DEST, as dpkg -x lays them out.
unpack() {
    dest=$1
    shift
    rm -rf "$tmp/debs" && mkdir -p "$tmp/debs" "$dest"
    (cd "$tmp/debs" && { apt-get download "$@" > /dev/null 2>&1 ||
        { apt-get update -qq && apt-get download "$@" > /dev/null; }; })
    for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$dest"; done
}

unpack "$dir/phdf5" libhdf5-openmpi-103-1 libhdf5-openmpi-dev libhdf5-openmpi-hl-100 libsz2 libaec0
rm -rf "$dir/phdf5/usr/share" "$dir"/phdf5/usr/lib/x86_64-linux-gnu/*fortran* \
       "$dir"/phdf5/usr/lib/x86_64-linux-gnu/*cpp* "$dir"/phdf5/usr/lib/x86_64-linux-gnu/hdf5/openmpi/*fortran*

unpack "$tmp/png" libpng-dev
rm -rf "$dir/png" && mkdir -p "$dir/png/include"
cp -L "$tmp"/png/usr/include/libpng16/*.h "$dir/png/include/"

unpack "$dir/deflate" libdeflate0 libdeflate-dev
unpack "$dir/isal" libisal2 libisal-dev
rm -rf "$dir/deflate/usr/share" "$dir/isal/usr/share"

if [ $clahe = 1 ]; then
    make build/core/clahe.o build/core/error.o > /dev/null
    mkdir -p "$dir/bin" "$dir/opencv"
    nvcc -O3 -std=c++17 -arch=sm_90 -I. -Xcompiler -fopenmp -o "$dir/bin/clahe_gpu_bench" bench/clahe_gpu_bench.cu \
        build/core/clahe.o build/core/error.o $(pkg-config --cflags --libs opencv4)
    # OpenCV and what it loads that a plain Ubuntu lacks; the C and C++ runtimes stay the machine's own.
    ldd "$dir/bin/clahe_gpu_bench" | awk '$3 ~ /^\// {print $3}' |
        grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libgomp|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
        while read -r l; do cp -L "$l" "$dir/opencv/"; done
fi
du -sh "$dir"/* | sed 's|^|make_devdeps: |'
