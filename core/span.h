/* span.h — a run of bytes somewhere in host memory: how a block that is not one buffer (a file
 * mapping of chunks stored apart, io/file_map.h) is handed to an engine, piece by piece, in order. */
#ifndef HQ_SPAN_H
#define HQ_SPAN_H

#include <stdint.h>

typedef struct hq_span {
    const void *p;
    uint64_t bytes;
} hq_span;

#endif
