/*
 * secret.h — reading a secret the service holds as text in a file (a
 * provider's API key): one reader for `oncegate serve`'s payout pipeline
 * and `oncegate payouts run`, so both trim, bound and wipe alike.
 */
#ifndef OG_COMMON_SECRET_H
#define OG_COMMON_SECRET_H

#include <stddef.h>

/* Reads the file at path into out (outlen bytes, NUL-terminated): its
 * content with surrounding white space (space, tab, CR, LF) trimmed, which
 * may be empty. Refuses (-1, out untouched) a file that cannot be opened or
 * read, one longer than max bytes, a content with a NUL byte, and one that
 * does not fit outlen. The bytes read are wiped before it returns, whatever
 * happened. Returns 0 or -1; never logs (the caller logs the path's
 * setting name, never the content). */
int og_secret_text_file_read(const char *path, size_t max, char *out,
                             size_t outlen);

/* Writes into buf (n bytes) why the key file at path, the setting what,
 * did not load with rc (an OG_E* code): "WHAT PATH: CODE: MESSAGE", and for
 * OG_EKEY_MODE the file's permission bits ("mode 0644") as stat() reads
 * them now, so an operator sees which file and which mode. Never a byte of
 * the file. Returns buf. */
char *og_key_file_refusal(char *buf, size_t n, const char *what,
                          const char *path, int rc);

#endif /* OG_COMMON_SECRET_H */
