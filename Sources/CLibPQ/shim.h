/*
 * libpq, PostgreSQL's C client, as a Swift module: its header, the type and
 * diagnostic codes Swift cannot import (server headers and character-literal
 * macros). No logic.
 */
#ifndef RUNLOOPD_CLIBPQ_SHIM_H
#define RUNLOOPD_CLIBPQ_SHIM_H

#include <libpq-fe.h>

/** Type OIDs of the parameters runloopd binds (catalog/pg_type_d.h, a server header). */
static const Oid runloopd_pq_int8_oid = 20;
static const Oid runloopd_pq_int2_oid = 21;
static const Oid runloopd_pq_int4_oid = 23;
static const Oid runloopd_pq_text_oid = 25;
static const Oid runloopd_pq_float4_oid = 700;
static const Oid runloopd_pq_float8_oid = 701;
static const Oid runloopd_pq_numeric_oid = 1700;

/** `PG_DIAG_MESSAGE_PRIMARY` (a character-literal macro) as a plain constant. */
static const int runloopd_pq_diag_message_primary = PG_DIAG_MESSAGE_PRIMARY;

#endif
