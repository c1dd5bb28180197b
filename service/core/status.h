/* status: memoryd's own result codes, shared by every module below the
 * gRPC layer (stores, backends, tiers). One vocabulary: a code keeps its
 * meaning as it passes from PostgreSQL or Redis code through a tier to the
 * handler, where rpc/ maps it to a gRPC status (rpc_status_of). Nothing
 * here knows about gRPC.
 *
 * Convention (DESIGN §7): functions return STATUS_OK (0) or a negative
 * code, with the human-readable reason on a context object (an err
 * buffer), never in a global. */
#ifndef MEMORYD_CORE_STATUS_H
#define MEMORYD_CORE_STATUS_H

#define STATUS_OK 0
#define STATUS_ENOTFOUND (-1)    /* absent, or hidden by the read diode */
#define STATUS_EDENIED (-2)      /* the write diode (or a scope) refuses the change */
#define STATUS_ECONFLICT (-3)    /* expected_version does not match; a concurrent create */
#define STATUS_EUNAVAILABLE (-4) /* a backend is down, unreachable or failing */
#define STATUS_ETIMEOUT (-5)     /* the call's deadline passed */
#define STATUS_EINTERNAL (-6)    /* a bug or corrupt data (a diode mismatch): logged */
#define STATUS_ENOMEM (-7)
#define STATUS_EINVALID (-8)       /* the input is refused (bad value, PII, contradicts state) */
#define STATUS_EEXISTS (-9)        /* a create of something that exists */
#define STATUS_ETOOBIG (-10)       /* the result would pass a size limit */
#define STATUS_EAUTH (-11)         /* a backend refused memoryd's own credentials */
#define STATUS_EBUSY (-12)         /* a bounded queue is full: the backend is saturated */
#define STATUS_ECANCELLED (-13)    /* the caller cancelled the call */
#define STATUS_EPRECONDITION (-14) /* the change is refused in the record's current state */
#define STATUS_EQUOTA (-15)        /* the change would pass a tenant's or principal's quota */

/* "STATUS_ENOTFOUND": for logs and tests. "STATUS_E?" for unknown codes. */
const char *status_name(int code);
/* A short default reason ("not found", "deadline exceeded") for a call
 * whose code came without a message. */
const char *status_text(int code);

#endif
