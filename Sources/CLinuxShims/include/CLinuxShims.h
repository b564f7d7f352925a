#ifndef CLINUXSHIMS_H
#define CLINUXSHIMS_H

// Swift's Glibc module does not export epoll or eventfd; the server's event loop needs
// both. If Glibc ever exports them, this module can go.
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif

#endif
