#include "doomed.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    unsigned seq; /* 0: never used; odd: no file, or its path changing; even: path is a file's */
    int taken;
    char path[PATH_MAX];
} slot;

static slot slots[HQ_DOOMED_SLOTS];

int hq_doomed_add(const char *path)
{
    const size_t n = strlen(path);
    if (n >= PATH_MAX)
        return -1;
    for (int k = 0; k < HQ_DOOMED_SLOTS; k++) {
        int free_slot = 0;
        if (!__atomic_compare_exchange_n(&slots[k].taken, &free_slot, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        slot *s = &slots[k];
        if (!(__atomic_load_n(&s->seq, __ATOMIC_RELAXED) & 1)) /* never used (0); a drop left it odd */
            __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        for (size_t i = 0; i <= n; i++)
            __atomic_store_n(&s->path[i], path[i], __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->seq, 1, __ATOMIC_RELEASE); /* even: the file's */
        return k;
    }
    return -1;
}

void hq_doomed_drop(int k)
{
    if (k < 0 || k >= HQ_DOOMED_SLOTS)
        return;
    slot *s = &slots[k];
    __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL); /* odd: no file */
    __atomic_store_n(&s->taken, 0, __ATOMIC_RELEASE);
}

void hq_doomed_unlink_all(void)
{
    char path[PATH_MAX];
    for (int k = 0; k < HQ_DOOMED_SLOTS; k++) {
        slot *s = &slots[k];
        const unsigned before = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (!before || (before & 1))
            continue;
        size_t i = 0;
        for (; i + 1 < sizeof path; i++) {
            path[i] = __atomic_load_n(&s->path[i], __ATOMIC_RELAXED);
            if (!path[i])
                break;
        }
        path[i] = 0;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == before)
            unlink(path);
    }
}
