#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include "CLinuxShims.h"

void cls_set_current_thread_name(const char *name) {
    char short_name[16];
    strncpy(short_name, name, sizeof short_name - 1);
    short_name[sizeof short_name - 1] = '\0';
    pthread_setname_np(pthread_self(), short_name);
}

int cls_affinity_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}
