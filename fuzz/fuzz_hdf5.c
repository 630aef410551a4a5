/* fuzz_hdf5.c — libFuzzer entry for the HDF5 reader: the input is one HDF5 file given as --input,
 * taken through the inventory scan, open_input, every block read and written back (harness.h). */
#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Named .h5: text is refused as "not an HDF5 file", never read as a list of PNG paths. */
    hqf_run(data, size, "h5");
    return 0;
}
