/*
 * auth.c — who is calling: principals identified by the SHA-256 of their API
 * key, and the snapshot of principals, verification keys and signing key
 * that requests use. A snapshot is immutable once built; SIGHUP builds a new
 * one and swaps it in (server.c), and a request keeps a reference to the one
 * it started with, so a reload never changes keys under a running request.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "secret.h" /* og_key_file_refusal */
#include "serve.h"

static const char *const role_names[] = {
#define ROLE_NAME(name, text) text,
    OG_ROLE_MAP(ROLE_NAME)
#undef ROLE_NAME
};

const char *og_role_name(unsigned role_bit)
{
    for (int i = 0; i < OG_ROLE_COUNT; i++)
        if (role_bit == (1u << i))
            return role_names[i];
    return NULL;
}

unsigned og_role_parse(const char *name)
{
    for (int i = 0; name && i < OG_ROLE_COUNT; i++)
        if (strcmp(name, role_names[i]) == 0)
            return 1u << i;
    return 0;
}

struct og_srv_auth {
    pthread_mutex_t mu;       /* guards refs only */
    int refs;
    og_principal *principals; /* n entries, owned */
    size_t n;
    og_keyset *keyset;
    og_signer *signer;        /* NULL: this instance does not issue */
    char **revoker_ids;       /* ids of principals with the revoker role */
    og_revoke_policy revokers;
    uint64_t generation;      /* unique per snapshot: og_srv_auth_generation */
};

/* Snapshots' generations: never reused, so a refusal cached under one
 * snapshot's keys is never taken for another's (refusals.h, RF3). */
static atomic_uint_fast64_t generations;

static void auth_free(og_srv_auth *a)
{
    if (!a)
        return;
    og_keyset_free(a->keyset);
    og_signer_free(a->signer);
    for (size_t i = 0; i < a->revokers.n_revokers; i++)
        free(a->revoker_ids[i]);
    free(a->revoker_ids);
    if (a->principals)
        sodium_memzero(a->principals, a->n * sizeof *a->principals);
    free(a->principals);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* The issuer's first private key in dir, by file name, into path (NULL
 * result: none). Sorting makes every instance pick the same key. */
static int find_signing_key(const char *dir, const char *issuer, char *path,
                            size_t len)
{
    struct dirent **names = NULL;
    size_t plen = strlen(issuer);
    int n, found = 0;

    n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        const char *f = names[i]->d_name;
        size_t fl = strlen(f), sl = strlen(OG_KEY_PRIVATE_SUFFIX);

        if (!found && fl > plen + 1 + sl && strncmp(f, issuer, plen) == 0 &&
            f[plen] == '.' &&
            strcmp(f + fl - sl, OG_KEY_PRIVATE_SUFFIX) == 0 &&
            (size_t)snprintf(path, len, "%s/%s", dir, f) < len)
            found = 1;
        free(names[i]);
    }
    free(names);
    return found;
}

int og_srv_auth_build(const og_srv_config *c, const og_principal *principals,
                      size_t n_principals, og_srv_auth **out, char *err,
                      size_t errlen)
{
    og_srv_auth *a = calloc(1, sizeof *a);
    char path[OG_PATH_MAX];
    size_t added = 0, nrev = 0;
    int rc;

    if (!a)
        return OG_ENOMEM;
    pthread_mutex_init(&a->mu, NULL);
    a->refs = 1;
    a->generation = atomic_fetch_add(&generations, 1) + 1;
    if (n_principals > 0) {
        a->principals = calloc(n_principals, sizeof *a->principals);
        a->revoker_ids = calloc(n_principals, sizeof *a->revoker_ids);
        if (!a->principals || !a->revoker_ids) {
            rc = OG_ENOMEM;
            goto fail;
        }
        memcpy(a->principals, principals, n_principals * sizeof *principals);
        a->n = n_principals;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (!(a->principals[i].roles & OG_ROLE_REVOKER))
            continue;
        if (!(a->revoker_ids[nrev] = strdup(a->principals[i].id))) {
            rc = OG_ENOMEM;
            goto fail;
        }
        a->revokers.n_revokers = ++nrev;
    }
    a->revokers.revokers = (const char *const *)a->revoker_ids;

    if ((rc = og_keyset_new(&a->keyset)) != 0)
        goto fail;
    if (c->keys_dir && c->keys_dir[0]) {
        rc = og_keyset_load_dir(a->keyset, c->keys_dir, &added);
        if (rc != 0) {
            snprintf(err, errlen, "keys_dir %s: %s", c->keys_dir,
                     og_err_name(rc));
            goto fail;
        }
    }
    if (c->signing_key && c->signing_key[0]) {
        rc = og_signer_load_file(c->signing_key, &a->signer);
        if (rc != 0) {
            og_key_file_refusal(err, errlen, "signing_key", c->signing_key,
                                rc);
            goto fail;
        }
    } else if (c->keys_dir && c->keys_dir[0] && c->issuer &&
               find_signing_key(c->keys_dir, c->issuer, path,
                                sizeof path) == 1) {
        rc = og_signer_load_file(path, &a->signer);
        if (rc != 0) {
            og_key_file_refusal(err, errlen, "signing key", path, rc);
            goto fail;
        }
    }
    *out = a;
    return 0;
fail:
    if (err && errlen && !err[0])
        snprintf(err, errlen, "%s", og_err_name(rc));
    auth_free(a);
    return rc;
}

void og_srv_auth_ref(og_srv_auth *a)
{
    pthread_mutex_lock(&a->mu);
    a->refs++;
    pthread_mutex_unlock(&a->mu);
}

void og_srv_auth_unref(og_srv_auth *a)
{
    int left;

    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    left = --a->refs;
    pthread_mutex_unlock(&a->mu);
    if (left == 0)
        auth_free(a);
}

const og_principal *og_srv_auth_lookup(const og_srv_auth *a, const char *key,
                                       size_t keylen)
{
    unsigned char h[OG_API_KEY_HASH_LEN];
    const og_principal *found = NULL;

    if (!a || !key || keylen == 0 || keylen > OG_API_KEY_MAX)
        return NULL;
    crypto_hash_sha256(h, (const unsigned char *)key, keylen);
    /* Every principal is compared, in constant time, whatever matched
     * before: the time taken says nothing about which key is close. */
    for (size_t i = 0; i < a->n; i++) {
        int eq = sodium_memcmp(h, a->principals[i].key_hash, sizeof h) == 0;
        if (eq && !found)
            found = &a->principals[i];
    }
    sodium_memzero(h, sizeof h);
    return found;
}

const og_keyset *og_srv_auth_keyset(const og_srv_auth *a)
{
    return a->keyset;
}

uint64_t og_srv_auth_generation(const og_srv_auth *a)
{
    return a->generation;
}

const og_signer *og_srv_auth_signer(const og_srv_auth *a)
{
    return a->signer;
}

const og_revoke_policy *og_srv_auth_revokers(const og_srv_auth *a)
{
    return &a->revokers;
}
