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

int odp_lock_file(const char *path, long *holder, odp_err *err)
{
    *holder = 0;
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return odp_fail_errno(err, odp_code_from_errno(errno), errno, "%s", path);
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            int e = errno;
            if (e == EWOULDBLOCK) {
                char buf[32] = "";
                ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
                if (n > 0)
                    *holder = strtol(buf, NULL, 10);
            }
            close(fd);
            if (e == EWOULDBLOCK)
                return odp_fail(err, ODP_EBUSY, "%s is held by pid %ld", path, *holder);
            return odp_fail_errno(err, ODP_EIO, e, "flock %s", path);
        }
        /* The holder before us may have removed the file between our open and our flock: then we locked
         * a file nobody else will see; try again with the one at path. */
        struct stat mine, there;
        if (fstat(fd, &mine) == 0 && stat(path, &there) == 0 && mine.st_ino == there.st_ino &&
            mine.st_dev == there.st_dev) {
            char pid[32];
            int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)len, 0) != len) {
                int e = errno;
                close(fd);
                return odp_fail_errno(err, ODP_EIO, e, "writing %s", path);
            }
            return fd;
        }
        close(fd);
    }
    return odp_fail(err, ODP_EBUSY, "%s keeps changing (another process taking and removing it)", path);
}

void odp_unlock_file(const char *path, int fd)
{
    unlink(path);
    close(fd);
}
