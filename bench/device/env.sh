# Source this on a GPU machine, from the repository root, before building there: points the build
# at the carried parallel HDF5 (.devdeps/phdf5) and, where the machine has only libpng's runtime,
# at the carried libpng headers (.devdeps/png/include). Used by device_full.sh and device_multi.sh.
. bench/device/use-parallel-hdf5.sh .devdeps/phdf5
if ! echo '#include <png.h>' | cc -E - > /dev/null 2>&1; then
    export CPATH="$PWD/.devdeps/png/include:$CPATH"
    mkdir -p .devdeps/png/lib
    ln -sf "$(ls /usr/lib/x86_64-linux-gnu/libpng16.so.16* | head -1)" .devdeps/png/lib/libpng16.so
    export LIBRARY_PATH="$PWD/.devdeps/png/lib:$LIBRARY_PATH"
fi
# Containers forbid the cross-process memory attach Open MPI's shared-memory transport tries first.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# libdeflate (the HDF5 direct-chunk path inflates and deflates with it), where the machine lacks it:
# .devdeps/deflate holds Debian's libdeflate0 and libdeflate-dev unpacked (dpkg -x).
if [ -d .devdeps/deflate/usr ] && ! echo '#include <libdeflate.h>' | cc -E - > /dev/null 2>&1; then
    export CPATH="$PWD/.devdeps/deflate/usr/include:$CPATH"
    export LIBRARY_PATH="$PWD/.devdeps/deflate/usr/lib/x86_64-linux-gnu:$LIBRARY_PATH"
    export LD_LIBRARY_PATH="$PWD/.devdeps/deflate/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
fi
# ISA-L (io/hdf5/codec.c deflates level-1 chunks with its igzip), the same way: .devdeps/isal holds
# Debian's libisal2 and libisal-dev unpacked (dpkg -x).
if [ -d .devdeps/isal/usr ] && ! echo '#include <isa-l/igzip_lib.h>' | cc -E - > /dev/null 2>&1; then
    export CPATH="$PWD/.devdeps/isal/usr/include:$CPATH"
    export LIBRARY_PATH="$PWD/.devdeps/isal/usr/lib/x86_64-linux-gnu:$LIBRARY_PATH"
    export LD_LIBRARY_PATH="$PWD/.devdeps/isal/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
fi
