/* affinity_probe: prints the CPUs it may run on as the kernel tells it, twice: its own sched_getaffinity
 * and that of a thread it starts (placement must reach a runner's threadpool), and the Cpus_allowed_list
 * line of /proc/self/status. The test peer for odp-rusage --cpus and odp's --cpus/--cluster:
 *   affinity=0-1 thread=0-1 status=0-1 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

static void format(const cpu_set_t *set, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int d = c;
        while (d + 1 < CPU_SETSIZE && CPU_ISSET(d + 1, set))
            d++;
        int w = d > c ? snprintf(out + len, n - len, "%s%d-%d", len ? "," : "", c, d)
                      : snprintf(out + len, n - len, "%s%d", len ? "," : "", c);
        if (w < 0 || (size_t)w >= n - len)
            break;
        len += (size_t)w;
        c = d;
    }
}

static char thread_cpus[4096];

static void *thread_main(void *arg)
{
    (void)arg;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        format(&set, thread_cpus, sizeof thread_cpus);
    return NULL;
}

int main(void)
{
    cpu_set_t set;
    char own[4096] = "?", status[4096] = "?", line[8192];
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        format(&set, own, sizeof own);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) == 0)
        pthread_join(t, NULL);
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;
            v += strspn(v, " \t");
            v[strcspn(v, "\n")] = 0;
            snprintf(status, sizeof status, "%s", v);
        }
    }
    if (f)
        fclose(f);
    printf("affinity=%s thread=%s status=%s\n", own, thread_cpus, status);
    return 0;
}
