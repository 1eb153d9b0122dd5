/* File helpers that keep their promises: a file written atomically is either complete or absent. */
#ifndef ODP_FS_H
#define ODP_FS_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* Writes data to path through a temporary file in the same directory, fsync, rename, fsync the directory.
 * batch: the data only written out to the device (sync_file_range: no cache flush, no journal commit) and the
 * directory not synced; the next unbatched write in the same directory makes it durable too (its directory's
 * fsync commits the rename, and on a journalling file system, ext4 or xfs, the commit flushes the device's
 * cache after the data already written out): one flush for a run's files, as git's core.fsyncMethod=batch. */
int odp_write_atomic(const char *path, const void *data, size_t n, mode_t mode, int batch, odp_err *err);
/* Appends data (one JSONL record, say) to path and fsyncs: a finished record survives a crash. */
int odp_append_sync(const char *path, const void *data, size_t n, odp_err *err);
/* Whether the file at path holds the bytes needle[0..n) (1 <= n <= 4096): *found = 1 or 0. Read in fixed-size
 * pieces, never whole: a many-MB runner read into memory costs a page fault per 4 KB (a 7.5 MB one, ~60 ms on a
 * VM), the search a copy from the page cache (~2 ms). */
int odp_file_contains(const char *path, const void *needle, size_t n, int *found, odp_err *err);
/* mkdir -p. */
int odp_mkdir_p(const char *path, mode_t mode, odp_err *err);
/* Takes an exclusive flock on the file at path itself (created if absent), so whoever can write the file, any
 * user, or another NFS client, is excluded; a process that dies holds nothing, and nothing is left behind.
 * Returns the open descriptor (>= 0); ODP_EBUSY when another process holds it (*holder = its pid when this
 * machine sees it, else 0), or another negative odp_code. */
int odp_lock_file(const char *path, long *holder, odp_err *err);
/* Gives the lock back (closes fd); the file stays. */
void odp_unlock_file(int fd);

#endif
