/* Placement: a rank's share of the node's CPUs, the widening of a launcher's narrow binding (and
 * HQ_KEEP_BINDING=1 keeping it), and the rule by which --device auto takes the GPU. */
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "../../app/placement.h"

static void share(void **state)
{
    (void)state;
    assert_int_equal(hq_cpu_share(16, 1), 16);
    assert_int_equal(hq_cpu_share(16, 2), 8);
    assert_int_equal(hq_cpu_share(16, 3), 5);
    assert_int_equal(hq_cpu_share(2, 3), 1); /* oversubscribed: still one */
    assert_int_equal(hq_cpu_share(1, 1), 1);
    assert_int_equal(hq_cpu_share(8, 0), 8);
}

static void auto_rule(void **state)
{
    (void)state;
    assert_false(hq_auto_uses_gpu(0, 1));  /* no GPU */
    assert_true(hq_auto_uses_gpu(1, 1));   /* one rank, one GPU */
    assert_true(hq_auto_uses_gpu(8, 8));   /* a GPU each */
    assert_true(hq_auto_uses_gpu(8, 4));
    assert_false(hq_auto_uses_gpu(1, 2));  /* two ranks would share one */
    assert_false(hq_auto_uses_gpu(1, 8));
    assert_false(hq_auto_uses_gpu(8, 16));
}

static int mask_count(void)
{
    cpu_set_t m;
    return sched_getaffinity(0, sizeof m, &m) == 0 ? CPU_COUNT(&m) : -1;
}

/* Binds this thread to its first allowed CPU, as mpirun -np 1 does. */
static int bind_to_one(cpu_set_t *saved)
{
    if (sched_getaffinity(0, sizeof *saved, saved) != 0)
        return -1;
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, saved)) {
            CPU_SET(c, &one);
            break;
        }
    return sched_setaffinity(0, sizeof one, &one);
}

static void widening(void **state)
{
    (void)state;
    cpu_set_t saved, orig;
    hq_cpus p;
    assert_int_equal(sched_getaffinity(0, sizeof orig, &orig), 0);
    /* An unbound process keeps its mask; its share is the node's CPUs over the ranks. */
    hq_place_cpus(0, 1, &p);
    assert_int_equal(p.widened, 0);
    assert_true(p.node >= 1 && p.share == p.node && p.cpus == p.share);
    const int node = p.node;
    if (node < 2)
        skip(); /* nothing to widen on a one-CPU machine */
    assert_int_equal(bind_to_one(&saved), 0);
    /* One rank bound to one CPU: widened to the node. */
    hq_place_cpus(0, 1, &p);
    assert_int_equal(p.bound, 1);
    assert_int_equal(p.widened, 1);
    assert_int_equal(p.cpus, node);
    assert_int_equal(mask_count(), node);
    /* As many ranks as CPUs: a share of one, the binding kept. */
    assert_int_equal(bind_to_one(&saved), 0);
    hq_place_cpus(1, node, &p);
    assert_int_equal(p.widened, 0);
    assert_int_equal(p.cpus, 1);
    assert_int_equal(mask_count(), 1);
    /* HQ_KEEP_BINDING=1: never widened, and the rank works on what it was given. */
    setenv("HQ_KEEP_BINDING", "1", 1);
    hq_place_cpus(0, 1, &p);
    unsetenv("HQ_KEEP_BINDING");
    assert_int_equal(p.widened, 0);
    assert_int_equal(p.cpus, 1);
    assert_int_equal(mask_count(), 1);
    /* Two ranks of one node, each bound to one CPU: disjoint halves. */
    if (node >= 4) {
        cpu_set_t a, b;
        hq_place_cpus(0, 2, &p);
        assert_int_equal(p.cpus, node / 2);
        sched_getaffinity(0, sizeof a, &a);
        assert_int_equal(bind_to_one(&saved), 0);
        hq_place_cpus(1, 2, &p);
        sched_getaffinity(0, sizeof b, &b);
        cpu_set_t both;
        CPU_AND(&both, &a, &b);
        assert_int_equal(CPU_COUNT(&both), 0);
    }
    sched_setaffinity(0, sizeof orig, &orig);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(share),
        cmocka_unit_test(auto_rule),
        cmocka_unit_test(widening),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
