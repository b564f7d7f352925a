#ifndef CLIBMEMCACHED_SHIM_H
#define CLIBMEMCACHED_SHIM_H

// libmemcached 1.1 (Debian bookworm: libmemcached-dev, libmemcached11).
#include <libmemcached/memcached.h>

#endif
