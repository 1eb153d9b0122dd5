#include "pg.h"

#include "../util/wait.h"

#include <string.h>

/* libpq's messages end with a newline (and sometimes hold several lines): one line for odp's errors. */
static int pg_fail(odp_err *err, odp_code code, const char *what, const char *msg)
{
    char line[400];
    snprintf(line, sizeof line, "%s", msg ? msg : "");
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    size_t n = strlen(line);
    while (n > 0 && line[n - 1] == ' ')
        line[--n] = 0;
    return odp_fail(err, code, "postgresql: %s%s%s", what, n ? ": " : "", line);
}

static int wait_socket(PGconn *conn, short events, double deadline, odp_err *err)
{
    struct pollfd p = {.fd = PQsocket(conn), .events = events};
    if (p.fd < 0)
        return pg_fail(err, ODP_EIO, "connection lost", PQerrorMessage(conn));
    return odp_wait(&p, 1, deadline, err);
}

/* libpq prints the server's notices (NOTICE: relation ... already exists) on stderr by default; odp's C never
 * prints, and none of them needs the user. */
static void drop_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

int odp_pg_connect(const char *conninfo, double deadline, PGconn **out, odp_err *err)
{
    *out = NULL;
    PGconn *conn = PQconnectStart(conninfo);
    if (!conn)
        return odp_fail(err, ODP_EIO, "postgresql: out of memory");
    PQsetNoticeProcessor(conn, drop_notice, NULL);
    if (PQstatus(conn) == CONNECTION_BAD) {
        pg_fail(err, ODP_EIO, "cannot connect", PQerrorMessage(conn));
        PQfinish(conn);
        return err->code;
    }
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    for (;;) {
        if (st == PGRES_POLLING_OK)
            break;
        if (st == PGRES_POLLING_FAILED) {
            const char *msg = PQerrorMessage(conn);
            pg_fail(err, strstr(msg, "authentication") || strstr(msg, "password") ? ODP_EAUTH : ODP_EIO,
                    "cannot connect", msg);
            PQfinish(conn);
            return err->code;
        }
        int rc = wait_socket(conn, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline, err);
        if (rc) {
            PQfinish(conn);
            return rc;
        }
        st = PQconnectPoll(conn);
    }
    if (PQsetnonblocking(conn, 1) != 0) {
        pg_fail(err, ODP_EIO, "non-blocking mode", PQerrorMessage(conn));
        PQfinish(conn);
        return err->code;
    }
    *out = conn;
    return 0;
}

PGresult *odp_pg_query(PGconn *conn, const char *sql, int nparams, const char *const *values, double deadline,
                       odp_err *err)
{
    err->code = ODP_OK;
    int sent = nparams > 0 ? PQsendQueryParams(conn, sql, nparams, NULL, values, NULL, NULL, 0)
                           : PQsendQuery(conn, sql);
    if (!sent) {
        pg_fail(err, ODP_EIO, "cannot send", PQerrorMessage(conn));
        return NULL;
    }
    int f;
    while ((f = PQflush(conn)) == 1) {
        if (wait_socket(conn, POLLIN | POLLOUT, deadline, err))
            return NULL;
        if (!PQconsumeInput(conn)) {
            pg_fail(err, ODP_EIO, "connection lost", PQerrorMessage(conn));
            return NULL;
        }
    }
    if (f < 0) {
        pg_fail(err, ODP_EIO, "connection lost", PQerrorMessage(conn));
        return NULL;
    }
    PGresult *last = NULL, *failed = NULL;
    for (;;) {
        while (PQisBusy(conn)) {
            int lost = wait_socket(conn, POLLIN, deadline, err) ? 0 : !PQconsumeInput(conn);
            if (lost || err->code) {
                if (lost)
                    pg_fail(err, ODP_EIO, "connection lost", PQerrorMessage(conn));
                PQclear(last);
                PQclear(failed);
                return NULL;
            }
        }
        PGresult *r = PQgetResult(conn);
        if (!r)
            break;
        ExecStatusType s = PQresultStatus(r);
        if (s == PGRES_FATAL_ERROR || s == PGRES_BAD_RESPONSE || s == PGRES_NONFATAL_ERROR) {
            if (!failed)
                failed = r;
            else
                PQclear(r);
            continue;
        }
        PQclear(last);
        last = r;
    }
    if (failed) {
        const char *state = PQresultErrorField(failed, PG_DIAG_SQLSTATE);
        /* 40001 serialization, 40P01 deadlock, 55P03 lock not available: another writer; 57P01 admin shutdown */
        odp_code code = state && (strncmp(state, "40", 2) == 0 || strcmp(state, "55P03") == 0) ? ODP_EBUSY
                        : state && strncmp(state, "57", 2) == 0                                  ? ODP_EIO
                                                                                                 : ODP_EPROTO;
        pg_fail(err, code, state ? state : "error", PQresultErrorMessage(failed));
        PQclear(failed);
        PQclear(last);
        return NULL;
    }
    if (!last) {
        pg_fail(err, PQstatus(conn) == CONNECTION_BAD ? ODP_EIO : ODP_EPROTO,
                PQstatus(conn) == CONNECTION_BAD ? "connection lost" : "no result", PQerrorMessage(conn));
        return NULL;
    }
    return last;
}
