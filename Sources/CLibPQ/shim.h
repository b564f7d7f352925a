#ifndef CLIBPQ_SHIM_H
#define CLIBPQ_SHIM_H

// libpq's client API. Debian installs it under /usr/include/postgresql, which the
// package finds through pkg-config ("libpq"). Nothing here needs a shim yet: libpq's
// functions are all non-variadic and callable from Swift as they are.
#include <libpq-fe.h>

#endif
