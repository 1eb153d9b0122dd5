#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void fsync_dir_of(const char *path)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

int odp_write_atomic(const char *path, const void *data, size_t n, mode_t mode, int batch, odp_err *err)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return odp_fail(err, ODP_EIO, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot write %s", path);
    if (write_all(fd, data, n) || (batch ? sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE |
                                                       SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)
                                         : fsync(fd))) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return odp_fail_errno(err, ODP_EIO, e, "cannot write %s", path);
    }
    close(fd);
    if (rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return odp_fail_errno(err, ODP_EIO, e, "cannot rename into %s", path);
    }
    if (!batch)
        fsync_dir_of(path);
    return 0;
}

int odp_append_sync(const char *path, const void *data, size_t n, odp_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot append to %s", path);
    int rc = 0;
    if (write_all(fd, data, n) || fsync(fd))
        rc = odp_fail_errno(err, ODP_EIO, errno, "cannot append to %s", path);
    close(fd);
    return rc;
}

int odp_file_contains(const char *path, const void *needle, size_t n, int *found, odp_err *err)
{
    enum { PIECE = 64 * 1024, NEEDLE_MAX = 4096 };
    if (n == 0 || n > NEEDLE_MAX)
        return odp_fail(err, ODP_EIO, "a needle of %zu bytes (1 to %d)", n, NEEDLE_MAX);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot open %s", path);
    /* each piece after the previous one's last n - 1 bytes: a needle across two reads is seen whole */
    char buf[NEEDLE_MAX - 1 + PIECE];
    size_t kept = 0;
    *found = 0;
    for (;;) {
        ssize_t r = read(fd, buf + kept, PIECE);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return odp_fail_errno(err, ODP_EIO, e, "cannot read %s", path);
        }
        if (r == 0)
            break;
        size_t have = kept + (size_t)r;
        if (memmem(buf, have, needle, n)) {
            *found = 1;
            break;
        }
        kept = have < n - 1 ? have : n - 1;
        memmove(buf, buf + have - kept, kept);
    }
    close(fd);
    return 0;
}

int odp_mkdir_p(const char *path, mode_t mode, odp_err *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return odp_fail(err, ODP_EIO, "path too long: %s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, mode) && errno != EEXIST)
            return odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot create %s", buf);
        *p = '/';
    }
    if (mkdir(buf, mode) && errno != EEXIST)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot create %s", buf);
    struct stat st;
    if (stat(buf, &st) || !S_ISDIR(st.st_mode))
        return odp_fail(err, ODP_EIO, "%s exists and is not a directory", buf);
    return 0;
}

/* The pid of this machine's process holding a flock on fd's file, from /proc/locks ("1: FLOCK ADVISORY
 * WRITE PID MAJ:MIN:INO 0 EOF", device numbers in hex); 0 when none is seen (a holder on another NFS client,
 * or in another PID namespace). */
static long flock_holder(int fd)
{
    struct stat st;
    if (fstat(fd, &st))
        return 0;
    char want[64];
    snprintf(want, sizeof want, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino);
    FILE *f = fopen("/proc/locks", "re");
    if (!f)
        return 0;
    char line[256];
    long holder = 0;
    while (!holder && fgets(line, sizeof line, f)) {
        char kind[16], rw[16], where[64];
        long pid;
        /* waiters are listed as "N: -> FLOCK ...": that field mismatch skips them */
        if (sscanf(line, "%*d: %15s %*s %15s %ld %63s", kind, rw, &pid, where) == 4 && !strcmp(kind, "FLOCK") &&
            !strcmp(where, want) && pid > 0 && pid != (long)getpid())
            holder = pid;
    }
    fclose(f);
    return holder;
}

int odp_lock_file(const char *path, long *holder, odp_err *err)
{
    *holder = 0;
    /* Opened for writing: over NFS, flock becomes a whole-file lock on the server, a write lock needs it. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return odp_fail_errno(err, odp_code_from_errno(errno), errno, "cannot lock %s", path);
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        if (e == EWOULDBLOCK)
            *holder = flock_holder(fd);
        close(fd);
        if (e != EWOULDBLOCK)
            return odp_fail_errno(err, odp_code_from_errno(e), e, "cannot lock %s", path);
        if (*holder)
            return odp_fail(err, ODP_EBUSY, "%s is held by pid %ld", path, *holder);
        return odp_fail(err, ODP_EBUSY, "%s is held by a process this machine does not see (another NFS client?)",
                        path);
    }
    return fd;
}

void odp_unlock_file(int fd)
{
    close(fd);
}
