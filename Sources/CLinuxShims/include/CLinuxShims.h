#ifndef CLINUXSHIMS_H
#define CLINUXSHIMS_H

// Swift's Glibc module does not export epoll or eventfd; the server's event loop needs
// both. If Glibc ever exports them, this part can go.
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif

// GNU extensions Swift's Glibc module leaves out (it is built without _GNU_SOURCE); shim.c
// defines them, compiled with it.

/// Names the calling thread (what `top -H` and `ps -T` show); names longer than 15 bytes are cut.
void cls_set_current_thread_name(const char *name);

/// The CPUs this thread may run on (sched_getaffinity, which taskset and cpusets narrow);
/// 0 when the call fails.
int cls_affinity_cpu_count(void);

#endif
