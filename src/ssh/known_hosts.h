/* known_hosts checking done by odp itself rather than libssh2_knownhost_checkp: libssh2 1.10 lets a plain
 * `host` entry match any port and cannot tell which key types a host has. This follows OpenSSH: a non-22
 * port is only matched by `[host]:port` entries; hashed names (|1|salt|hash), comma lists, `*`/`?`
 * patterns and `!` negation are honoured; @revoked keys are refused; @cert-authority lines are skipped. */
#ifndef ODP_KNOWN_HOSTS_H
#define ODP_KNOWN_HOSTS_H

#include <stddef.h>

#include "../util/err.h"

typedef enum {
    ODP_KH_UNKNOWN = 0, /* no entry for this host and key type */
    ODP_KH_MATCH,       /* an entry holds exactly this key */
    ODP_KH_CHANGED,     /* the host has an entry of this key type with another key */
    ODP_KH_REVOKED,     /* the key is marked @revoked */
} odp_kh_status;

/* Name known_hosts uses for host:port: `host` for port 22, `[host]:port` otherwise. */
void odp_kh_hostname(const char *host, int port, char *out, size_t n);

/* Checks key (the SSH wire blob: string type, then the key) against known_hosts text. types (may be NULL)
 * receives a comma-separated list of the key types known for this host, for the host-key preference. */
odp_kh_status odp_kh_check(const char *text, size_t len, const char *host, int port, const unsigned char *key,
                           size_t key_len, char *types, size_t types_len);

/* Key type name from a key blob (e.g. "ssh-ed25519"); 0, or -1 on a malformed blob. */
int odp_kh_keytype(const unsigned char *key, size_t key_len, char *out, size_t n);

/* "SHA256:<base64 without padding>", as OpenSSH prints it. */
void odp_kh_fingerprint(const unsigned char *key, size_t key_len, char *out, size_t n);

/* Appends `name type base64` to the file (created 0600, parent directory 0700 if missing), fsynced. */
int odp_kh_append(const char *path, const char *host, int port, const unsigned char *key, size_t key_len,
                  odp_err *err);

#endif
