/* qdrant_json_fuzz: every Qdrant answer parser on arbitrary bytes. The
 * bytes come from a server memoryd does not control (or from whatever
 * answers at the configured URL), so each parser must stay inside the
 * buffer, bound its recursion, and either succeed with what its header
 * promises or fail with a message and no reference left behind (ASan's
 * leak check sees a forgotten json_decref). */
#include <string.h>

#include "service/core/arena.h"
#include "service/qdrant/qdrant_json.h"
#include "tests/fuzz/fuzz_target.h"

static void check_meta(const tier_meta *m) {
  FUZZ_CHECK(m->owner && m->owner[0]);
  FUZZ_CHECK(m->label >= 1 && m->label <= 4);
  FUZZ_CHECK(m->version >= 1);
  FUZZ_CHECK(m->create_us >= 0 && m->update_us >= 0);
  FUZZ_CHECK(m->npii <= QDRANT_JSON_MAX_PII);
  for (size_t i = 0; i < m->npii; i++)
    FUZZ_CHECK(m->pii_kinds[i] && strlen(m->pii_kinds[i]) <= QDRANT_JSON_MAX_PII_LEN);
}

static void check_point(const vs_point *p, const qdrant_json_read *r) {
  FUZZ_CHECK(p->id.uuid[0] == '\0' || strlen(p->id.uuid) == 36);
  FUZZ_CHECK(!r->with_payload || json_is_object(p->payload));
  FUZZ_CHECK(r->with_payload || !p->payload);
  FUZZ_CHECK(!r->with_vector || p->vector);
  check_meta(&p->meta);
}

static void points(const char *b, size_t n, arena *a, const qdrant_json_read *r) {
  char err[256];
  for (int legacy = 0; legacy < 2; legacy++) {
    vs_hit *hits = NULL;
    size_t nh = 99;
    err[0] = '\0';
    int rc = qdrant_json_parse_hits(b, n, r, legacy, a, &hits, &nh, err, sizeof err);
    if (rc == STATUS_OK) {
      for (size_t i = 0; i < nh; i++) check_point(&hits[i].point, r);
      vs_hits_release(hits, nh);
    } else {
      FUZZ_CHECK(rc == STATUS_EINTERNAL || rc == STATUS_ENOMEM);
      FUZZ_CHECK(!hits && nh == 0 && err[0]);
    }
  }
  for (int scroll = 0; scroll < 2; scroll++) {
    vs_point *pts = NULL;
    size_t np = 99;
    vs_id next;
    int has_next = -1;
    err[0] = '\0';
    int rc =
        qdrant_json_parse_records(b, n, r, scroll, a, &pts, &np, &next, &has_next, err, sizeof err);
    if (rc == STATUS_OK) {
      FUZZ_CHECK(has_next == 0 || (scroll && has_next == 1));
      for (size_t i = 0; i < np; i++) check_point(&pts[i], r);
      vs_points_release(pts, np);
    } else {
      FUZZ_CHECK(rc == STATUS_EINTERNAL || rc == STATUS_ENOMEM);
      FUZZ_CHECK(!pts && np == 0 && err[0]);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Exact-size copy: reads past the end are ASan reports. */
  char *b = malloc(size ? size : 1);
  if (!b) return 0;
  if (size) memcpy(b, data, size);
  char err[256];

  char text[48];
  memset(text, 'Z', sizeof text);
  qdrant_json_error_text(b, size, text, sizeof text);
  size_t tl = strnlen(text, sizeof text);
  FUZZ_CHECK(tl > 0 && tl < sizeof text);
  for (size_t i = 0; i < tl; i++) FUZZ_CHECK(text[i] >= 0x20 && text[i] < 0x7f);

  json_t *j = NULL;
  if (qdrant_json_parse_envelope(b, size, &j, err, sizeof err) == STATUS_OK)
    FUZZ_CHECK(j != NULL);
  else
    FUZZ_CHECK(j == NULL && err[0]);
  json_decref(j);

  qdrant_json_version v = {-1, -1, -1};
  if (qdrant_json_parse_version(b, size, &v, err, sizeof err) == STATUS_OK)
    FUZZ_CHECK(v.major >= 0 && v.minor >= 0 && v.patch >= 0);

  int dims = 0, dist = 0;
  if (qdrant_json_parse_collection(b, size, &dims, &dist, err, sizeof err) == STATUS_OK)
    FUZZ_CHECK(dims >= 1 && dims <= VS_MAX_DIMS && qdrant_json_distance_name(dist));

  int flag = -1;
  if (qdrant_json_parse_bool(b, size, &flag, err, sizeof err) == STATUS_OK)
    FUZZ_CHECK(flag == 0 || flag == 1);
  int rc = qdrant_json_parse_update(b, size, err, sizeof err);
  FUZZ_CHECK(rc == STATUS_OK || rc == STATUS_ETIMEOUT || rc == STATUS_EINTERNAL ||
             rc == STATUS_ENOMEM);
  int64_t count = -1;
  if (qdrant_json_parse_count(b, size, &count, err, sizeof err) == STATUS_OK)
    FUZZ_CHECK(count >= 0);

  arena *a = arena_create();
  if (a) {
    /* Tenant "t1", 3 dims (what the seeds use), with and without
     * payloads and vectors. */
    qdrant_json_read all = {"t1", 3, 1, 1}, meta = {"t1", 3, 0, 0};
    points(b, size, a, &all);
    points(b, size, a, &meta);
    arena_free(a);
  }
  free(b);
  return 0;
}
