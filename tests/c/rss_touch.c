/* rss_touch MB: allocates MB megabytes (a decimal: 0.5 is fine), writes every page, then prints its own
 * peak RSS as the kernel keeps it for this process (VmHWM in /proc/self/status) just before it exits:
 *   VmHWM_kb=51712
 * The oracle of the peak-RSS tests: odp's figure for this process must match the process's own.
 * Built static (Makefile), so no dynamic loader adds to it and it runs on any x86_64 "board". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rss_touch MB\n");
        return 2;
    }
    size_t bytes = (size_t)(strtod(argv[1], NULL) * 1024 * 1024);
    volatile char *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "rss_touch: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < bytes; i += 4096)
        p[i] = (char)i;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long hwm = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            hwm = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    printf("VmHWM_kb=%ld\n", hwm);
    return hwm < 0;
}
