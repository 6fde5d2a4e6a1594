/*
 * retention.c — refusal records (og_store_cleanup) and operation records
 * (og_store_archive_operations), in bounded batches. What each batch may
 * delete is decided by the backend's statement; here only the loop.
 *
 * It carries S4 (bounded batches, dispatch.h); the backends' batches keep
 * M23-M25 (store_int.h).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "store/dispatch.h"
#include "store/store_int.h"

bool og__batch_args_ok(int batch, int max_batches)
{
    return batch >= 1 && batch <= OG_RETENTION_BATCH_MAX && max_batches >= 1 &&
           max_batches <= OG_RETENTION_BATCHES_MAX;
}

int og_store_cleanup(og_store *s, int batch, int max_batches,
                     og_cleanup_stats *out)
{
    og_cleanup_stats total = {0, 0, 0, 0}, one;
    int64_t n, from = OG__RETENTION_FROM_US;
    int rc;

    if (!s || !out || !og__batch_args_ok(batch, max_batches))
        return OG_EINVAL;
    do {
        memset(&one, 0, sizeof one);
        if ((rc = s->m->cleanup_batch(s->impl, batch, &from, &one)) < 0)
            return rc; /* earlier batches stay committed (S4) */
        n = one.admissions + one.revocations + one.consumes;
        if (n < 0 || n > batch)
            return OG_EINTERNAL;
        total.admissions += one.admissions;
        total.revocations += one.revocations;
        total.consumes += one.consumes;
        total.batches++;
    } while (n == batch && total.batches < max_batches);
    *out = total;
    return 0;
}

int og_store_archive_operations(og_store *s, int64_t older_than_us,
                                og_archive_mode mode, int batch,
                                int max_batches, og_archive_stats *out)
{
    og_archive_stats total = {0, 0, 0}, one;
    int64_t from = OG__RETENTION_FROM_US;
    int rc;

    if (!s || !out || !og__batch_args_ok(batch, max_batches) ||
        older_than_us < 0 || older_than_us > OG__TIME_MAX_US ||
        (mode != OG_ARCHIVE_MOVE && mode != OG_ARCHIVE_DELETE))
        return OG_EINVAL;
    do {
        memset(&one, 0, sizeof one);
        if ((rc = s->m->archive_batch(s->impl, older_than_us, mode, batch,
                                      &from, &one)) < 0)
            return rc;
        if (one.operations < 0 || one.operations > batch || one.events < 0)
            return OG_EINTERNAL;
        total.operations += one.operations;
        total.events += one.events;
        total.batches++;
    } while (one.operations == batch && total.batches < max_batches);
    *out = total;
    return 0;
}

