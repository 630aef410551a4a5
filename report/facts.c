/* facts.c — the facts of the inventory, plan and options the record needs (the same rules as
 * app/run/facts.c), and the one place a hook's failure is kept. */
#include <stdarg.h>
#include <stdio.h>

#include "report_internal.h"

hq_mode rep_mode_of(const hq_report *r, uint64_t item)
{
    return hq_item_mode(&r->cfg.inv->items[item], r->cfg.o->bits, r->cfg.o->color, r->cfg.o->fbins);
}

size_t rep_hist_len(const hq_mode *m)
{
    return (size_t)hq_mode_nhist(m) * hq_mode_bins(m);
}

/* The item and slice of a global image index (the item holding it: largest i with image0[i] <= g). */
uint64_t rep_item_of(const hq_report *r, uint64_t image)
{
    size_t lo = 0, hi = r->cfg.inv->n;
    while (hi - lo > 1) {
        const size_t mid = (lo + hi) / 2;
        if (r->cfg.plan->item_image0[mid] <= image)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The rank owning the first block of an image: the one that records its LUT, so that an image cut
 * into tiles over several ranks (each holding the same reduced histogram) counts once. */
int rep_first_owner(const hq_plan *p, uint64_t image)
{
    return hq_plan_image_owner(p, image);
}

void rep_fail_once(hq_report *r, int code, const char *fmt, ...)
{
    if (r->rc)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err.msg, sizeof r->err.msg, fmt, ap);
    va_end(ap);
    r->rc = code;
}
