/* backend.c — the PNG backend's face (io.h): its operations, each in the file of its job
 * (png_internal.h lists them). */
#include "png_internal.h"

const hq_io_ops hq_png_ops = {
    .name = "png",
    .concurrent = 1,
    .scan = png_scan,
    .open_input = png_open_input,
    .read_block = png_read_block,
    .create_output = png_create_output,
    .write_block = png_write_block,
    .close = png_close,
    .flush = png_flush,
    .output_state = png_output_state,
    .item_present = png_item_present,
    .sync_path = png_sync_path,
};
