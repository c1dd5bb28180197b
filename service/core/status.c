/* status: names and default texts of the codes; see status.h. */
#include "service/core/status.h"

const char *status_name(int code) {
    switch (code) {
    case STATUS_OK: return "STATUS_OK";
    case STATUS_ENOTFOUND: return "STATUS_ENOTFOUND";
    case STATUS_EDENIED: return "STATUS_EDENIED";
    case STATUS_ECONFLICT: return "STATUS_ECONFLICT";
    case STATUS_EUNAVAILABLE: return "STATUS_EUNAVAILABLE";
    case STATUS_ETIMEOUT: return "STATUS_ETIMEOUT";
    case STATUS_EINTERNAL: return "STATUS_EINTERNAL";
    case STATUS_ENOMEM: return "STATUS_ENOMEM";
    case STATUS_EINVALID: return "STATUS_EINVALID";
    case STATUS_EEXISTS: return "STATUS_EEXISTS";
    case STATUS_ETOOBIG: return "STATUS_ETOOBIG";
    case STATUS_EAUTH: return "STATUS_EAUTH";
    case STATUS_EBUSY: return "STATUS_EBUSY";
    case STATUS_ECANCELLED: return "STATUS_ECANCELLED";
    case STATUS_EPRECONDITION: return "STATUS_EPRECONDITION";
    case STATUS_EQUOTA: return "STATUS_EQUOTA";
    default: return "STATUS_E?";
    }
}

const char *status_text(int code) {
    switch (code) {
    case STATUS_OK: return "OK";
    case STATUS_ENOTFOUND: return "not found";
    case STATUS_EDENIED: return "permission denied";
    case STATUS_ECONFLICT: return "version conflict";
    case STATUS_EUNAVAILABLE: return "a backend is unavailable";
    case STATUS_ETIMEOUT: return "deadline exceeded";
    case STATUS_EINTERNAL: return "internal error";
    case STATUS_ENOMEM: return "out of memory";
    case STATUS_EINVALID: return "invalid request";
    case STATUS_EEXISTS: return "already exists";
    case STATUS_ETOOBIG: return "too big";
    case STATUS_EAUTH: return "a backend refused memoryd's credentials";
    case STATUS_EBUSY: return "a backend is saturated";
    case STATUS_ECANCELLED: return "cancelled";
    case STATUS_EPRECONDITION: return "refused in the record's current state";
    case STATUS_EQUOTA: return "over quota";
    default: return "unknown error";
    }
}
