/* PostgreSQL through libpq, waiting only in odp_wait: the connection is made with PQconnectPoll and every
 * query is sent and read non-blocking (PQsendQueryParams, PQflush, PQconsumeInput), so a later scheduler can
 * run other work while a lab's database answers. */
#ifndef ODP_PG_H
#define ODP_PG_H

#include <libpq-fe.h>

#include "../util/err.h"

/* Connects with a conninfo string or a postgresql:// URL; *out is the connection (non-blocking mode). */
int odp_pg_connect(const char *conninfo, double deadline, PGconn **out, odp_err *err);

/* Sends sql (with nparams text values, NULL = SQL NULL; nparams 0 allows several statements) and returns the
 * last result, which the caller PQclear()s; NULL with err set on a failed statement, a lost connection,
 * the deadline or Ctrl-C. After a timeout or a cancel the connection is in an unknown state: close it. */
PGresult *odp_pg_query(PGconn *conn, const char *sql, int nparams, const char *const *values, double deadline,
                       odp_err *err);

#endif
