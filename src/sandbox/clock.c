/*
 * clock.c — the sandbox's clock: the wall clock in microseconds and a sleep
 * that survives signals. store.c stamps rows with it and log.c stamps lines;
 * keeping it here lets the log stand below the store (store.c logs its
 * failures through log.c) without the log calling back into the store.
 */
#include <errno.h>
#include <time.h>

#include "sandbox.h"

int64_t og_sbx_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void og_sbx_sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

    while (us > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
