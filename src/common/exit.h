/*
 * exit.h — the exit codes of the oncegate command, which every subcommand
 * returns: those of src/cli/ (admit, keygen, grant, payout, ...) and those
 * src/serve/ implements (serve, recover, cleanup, archive-operations,
 * dev-env).
 * Sysexits-style where one fits; tests/cli.sh and operators' scripts rely
 * on them.
 */
#ifndef OG_EXIT_H
#define OG_EXIT_H

enum {
    OG_EXIT_OK = 0,           /* admitted or already admitted; success */
    OG_EXIT_REFUSED = 1,      /* refused; payout: nothing changed (not
                                 found, not recorded, already revoked) */
    OG_EXIT_USAGE = 2,        /* bad input or usage */
    OG_EXIT_INTERNAL = 70,    /* internal error */
    OG_EXIT_CANTCREAT = 73,   /* keygen: a key file already exists */
    OG_EXIT_IOERR = 74,       /* keygen: directory missing, write failed */
    OG_EXIT_UNAVAILABLE = 75, /* store unavailable: retry, same operation id */
    OG_EXIT_CONFIG = 78,      /* schema mismatch, bad store URL, bad timings */
};

/* The exit code for a negative OG_E* error. */
int og_exit_for_error(int err);

#endif /* OG_EXIT_H */
