/*
 * exit.c — the exit code for a library error (exit.h).
 */
#include "exit.h"
#include "oncegate/core.h"

int og_exit_for_error(int err)
{
    switch (err) {
    case OG_ESTORE_UNAVAILABLE:
        return OG_EXIT_UNAVAILABLE;
    case OG_ESCHEMA:
    case OG_EBAD_URL:
    case OG_ETIMINGS:
    case OG_ESTORE_KEYS:
    case OG_EKEY_MODE: /* a key file others may read: the setup, not usage */
        return OG_EXIT_CONFIG;
    case OG_EINTERNAL:
    case OG_ENOMEM:
        return OG_EXIT_INTERNAL;
    case OG_EKEY_EXISTS:
        return OG_EXIT_CANTCREAT;
    case OG_EKEY_IO:
        return OG_EXIT_IOERR;
    default:
        return OG_EXIT_USAGE;
    }
}
