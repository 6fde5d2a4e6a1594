/*
 * dev_payouts.c — dev mode's payout scenario (docs/payouts.md, "The running
 * example"): the records `serve --dev` creates in its store at startup, and
 * the banner's ready-to-paste steps that take PAY-3107 from Draft to Paid
 * through a lost provider answer.
 *
 *   tenant       T-0417: payouts enabled, EUR, daily limit 50,000.00,
 *                settlement time zone Europe/Berlin
 *   principal    clerk-22 (clerk, approval limit 10,000.00: dev.c's
 *                credentials, "clerk-22" in a data directory created since)
 *   beneficiary  BEN-2208: verified, Active
 *   destination  DST-77, registered to BEN-2208, a sandbox destination
 *                token, last changed 30 days before the store first saw it
 *   payout       PAY-3107: Draft, 4,250.00 EUR, "supplier-invoice INV-9031"
 *
 * Invariants:
 *   DS1  Creation only, every record by its conditional create: a record
 *        that exists (VERSION_CONFLICT) is left as it is, so a restart, a
 *        second instance or two instances starting together create each
 *        record once and never move PAY-3107 back to Draft.
 *   DS2  DST-77's changed_at is set by og_payout_destination_import (never
 *        ahead of the store's clock), not behind the store's back: the
 *        policy's "changed in the last 7 days" sees a registration that
 *        predates the scenario, as in docs/payouts.md.
 *   DS3  The destination token is a secret (random, "dst_dev_" + 32 hex
 *        digits): it goes to the store only, is wiped after, and appears in
 *        no error, log line or banner.
 *   DS4  The banner's release is chosen when the steps are pasted — `date`
 *        10 seconds ahead, dev mode's stand-in for the 16:00 batch — so the
 *        worker sends within seconds of the submission, whenever that is.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "serve.h"

#define DS_TENANT "T-0417"
#define DS_BENEFICIARY "BEN-2208"
#define DS_DESTINATION "DST-77"
#define DS_PAYOUT "PAY-3107"
#define DS_AMOUNT "4250.00"
#define DS_CURRENCY "EUR"
#define DS_PURPOSE "supplier-invoice INV-9031"
#define DS_DAILY_LIMIT INT64_C(5000000) /* 50,000.00 EUR */
#define DS_TIME_ZONE "Europe/Berlin"
#define DS_DESTINATION_AGE_US (INT64_C(30) * 86400 * 1000000)
#define DS_RELEASE_DELAY "10 seconds" /* DS4 */

/* 0 when rc and the outcome say the record is there now (written, or
 * there already: DS1); else an error with err naming what. */
static int ds_check(int rc, const og_payout_put_result *r, const char *what,
                    char *err, size_t errlen)
{
    if (rc != 0)
        return og_srv_fail(err, errlen, rc, "dev", "%s: cannot be created: %s",
                           what, og_strerror(rc));
    if (r->outcome != OG_PAYOUT_WRITTEN &&
        r->outcome != OG_PAYOUT_VERSION_CONFLICT)
        return og_srv_fail(err, errlen, OG_EINTERNAL, "dev",
                           "%s: cannot be created: %s", what,
                           og_payout_write_name(r->outcome));
    return 0;
}

int og_srv_dev_scenario(og_store *s, const og_srv_config *c, char *err,
                        size_t errlen)
{
    og_payout_put_result r = {0, 0};
    unsigned char raw[16];
    char token[8 + 2 * sizeof raw + 1];
    struct timespec now;
    int rc;

    {
        og_payout_tenant_settings t = {DS_TENANT, false, DS_DAILY_LIMIT,
                                       DS_CURRENCY, DS_TIME_ZONE};
        rc = og_payout_tenant_put(s, &t, 0, &r);
        if ((rc = ds_check(rc, &r, "tenant " DS_TENANT, err, errlen)) != 0)
            return rc;
    }
    {
        og_payout_beneficiary_record b = {DS_BENEFICIARY, DS_TENANT, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};
        rc = og_payout_beneficiary_put(s, &b, 0, &r);
        if ((rc = ds_check(rc, &r, "beneficiary " DS_BENEFICIARY, err,
                           errlen)) != 0)
            return rc;
    }
    /* DS3: a fresh random token; when DST-77 exists it is not used. */
    randombytes_buf(raw, sizeof raw);
    memcpy(token, "dst_dev_", 8);
    sodium_bin2hex(token + 8, sizeof token - 8, raw, sizeof raw);
    sodium_memzero(raw, sizeof raw);
    clock_gettime(CLOCK_REALTIME, &now);
    {
        og_payout_destination_record d = {DS_DESTINATION, DS_BENEFICIARY,
                                          token};
        int64_t now_us = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;

        rc = og_payout_destination_import(s, &d,
                                          now_us - DS_DESTINATION_AGE_US, &r);
        sodium_memzero(token, sizeof token);
        if ((rc = ds_check(rc, &r, "destination " DS_DESTINATION, err,
                           errlen)) != 0)
            return rc;
    }
    {
        og_payout_draft_req q = {
            DS_PAYOUT,
            {DS_TENANT, DS_BENEFICIARY, DS_DESTINATION, 1, DS_AMOUNT,
             DS_CURRENCY, DS_PURPOSE},
            og_srv_dev_principal_id(c, OG_ROLE_CLERK, "clerk-22")};

        rc = og_payout_draft(s, &q, &r);
        return ds_check(rc, &r, "payout " DS_PAYOUT, err, errlen);
    }
}

/* ===========================================================================
 * The banner's payout steps.
 * ========================================================================= */

/* Writes a `curl` reading PAY-3107 as the operator, indented by indent;
 * tail: what follows it (a pipe), or "" for the answer and its status. */
static void ds_read(FILE *f, const char *url, const char *g,
                    const char *tail, const char *indent)
{
    fprintf(f, "%s  curl -sS%s %s%s/v1/admin/payouts/" DS_PAYOUT " \\\n"
               "%s    -H \"Authorization: Bearer $OG_OPERATOR_KEY\"%s\n",
            indent, g, tail[0] ? "" : "-w '\\n%{http_code}\\n' ", url,
            indent, tail);
}

void og_srv_dev_banner_payouts(FILE *f, const og_srv_config *c,
                               const char *url, const char *sandbox_url)
{
    const char *g = strchr(url, '[') ? " -g" : ""; /* IPv6: no globbing */
    const char *clerk = og_srv_dev_principal_id(c, OG_ROLE_CLERK, "clerk-22");

    fprintf(f,
            "\n"
            "  # " OG_DEV_PAYOUT_STEPS " (docs/payouts.md, \"The running "
            "example\"): " DS_PAYOUT ", " DS_AMOUNT " " DS_CURRENCY "\n"
            "  # from " DS_TENANT " to " DS_BENEFICIARY " at " DS_DESTINATION
            ", drafted by %s, released " DS_RELEASE_DELAY " after it is\n"
            "  # submitted (dev mode's stand-in for the 16:00 batch); "
            "PAY-3107 is paid once per data directory.\n"
            "  # P1. read " DS_PAYOUT " as the operator: 200, state Draft, "
            "version 1\n",
            clerk);
    ds_read(f, url, g, "", "");
    fputs("  # P2. the provider will complete the payout but its answer "
          "will be lost\n",
          f);
    fprintf(f, "  curl -sS%s -X POST %s/_control/faults -w '\\n' \\\n"
               "    -H 'Content-Type: application/json' \\\n"
               "    -d '{\"fault\": \"drop_response_after_effect\", "
               "\"count\": 1}'\n",
            g, sandbox_url);
    fprintf(f,
            "  # P3. %s submits the intent for a release " DS_RELEASE_DELAY
            " from now: 200, Allowed (payout.allowed)\n"
            "  RELEASE=$(date -u -d '+" DS_RELEASE_DELAY
            "' +%%Y-%%m-%%dT%%H:%%M:%%SZ)\n"
            "  curl -sS%s -w '\\n%%{http_code}\\n' -X POST "
            "%s/v1/payouts/" DS_PAYOUT "/submit \\\n"
            "    -H 'Content-Type: application/json' "
            "-H \"Authorization: Bearer $OG_CLERK_KEY\" \\\n"
            "    -d '{\"beneficiary_id\": \"" DS_BENEFICIARY
            "\", \"destination_id\": \"" DS_DESTINATION "\", "
            "\"amount\": \"" DS_AMOUNT "\",\n"
            "         \"currency\": \"" DS_CURRENCY "\", \"purpose\": \""
            DS_PURPOSE "\", \"payout_version\": 1,\n"
            "         \"release_at\": \"'\"$RELEASE\"'\"}'\n",
            clerk, g, url);
    fputs("  # P4. at the release the worker (dev-payout-worker) sends it, "
          "the answer is lost: Unknown;\n"
          "  #     the reconciler looks the attempt up at the provider, "
          "finds it: Paid (within a minute)\n"
          "  for i in $(seq 90); do\n",
          f);
    ds_read(f, url, g, " \\\n      | grep -q '\"state\":\"Paid\"' && break", "  ");
    fputs("    sleep 1\n"
          "  done\n"
          "  # P5. its history: decided, claimed, resolved Unknown, then "
          "resolved Succeeded; state Paid\n",
          f);
    ds_read(f, url, g, "", "");
    fprintf(f, "  # P6. the sandbox counts ONE payout created and one "
               "payout request: nothing sent twice\n"
               "  curl -sS%s %s/_control/stats -w '\\n'\n",
            g, sandbox_url);
}
