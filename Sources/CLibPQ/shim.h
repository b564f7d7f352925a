#ifndef CLIBPQ_SHIM_H
#define CLIBPQ_SHIM_H

// libpq's client API. Debian installs it under /usr/include/postgresql, which the
// package finds through pkg-config ("libpq"). libpq's functions are all non-variadic and
// callable from Swift as they are.
#include <libpq-fe.h>

// The PQresultErrorField codes (PG_DIAG_SQLSTATE and friends, postgres_ext.h) are macros
// defined as character literals ('C'), which Swift's ClangImporter does not import. These
// constants carry the same values. They can go when Swift imports character-literal macros.
static const int CLibPQ_PG_DIAG_SQLSTATE = PG_DIAG_SQLSTATE;
static const int CLibPQ_PG_DIAG_MESSAGE_PRIMARY = PG_DIAG_MESSAGE_PRIMARY;
static const int CLibPQ_PG_DIAG_MESSAGE_DETAIL = PG_DIAG_MESSAGE_DETAIL;
static const int CLibPQ_PG_DIAG_CONSTRAINT_NAME = PG_DIAG_CONSTRAINT_NAME;

#endif
