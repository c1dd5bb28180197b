// The episodic tier's keyset scroll (vstore_scroll) and its exporter for
// Privacy.Export (episodic_export), driven on the vstore directly, on both
// backends: the embedded index against the real PostgreSQL of `make test`,
// and Qdrant against the Qdrant contract stand-in (tests/contract/), which
// checks every request against Qdrant's published OpenAPI spec.
#include <gtest/gtest.h>
#include <jansson.h>
#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/pg_testdb.h"
#include "tests/testing/qdrant_standin.h"

extern "C" {
#include "service/auth/principal.h"
#include "service/core/arena.h"
#include "service/core/clock.h"
#include "service/core/status.h"
#include "service/episodic/episodic_embedded.h"
#include "service/episodic/episodic_erase.h"
#include "service/qdrant/qdrant_store.h"
#include "service/store/pg_migrate.h"
#include "service/store/pg_pool.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_erase.h"
#include "service/vstore/vstore.h"
}

namespace {

const char kTenant[] = "t1";
const char kNilUuid[] = "00000000-0000-0000-0000-000000000000";
const char kUuidA[] = "0a000000-0000-4000-8000-000000000001";
const char kUuidB[] = "ffffffff-0000-4000-8000-000000000002";
const char kMaxUuid[] = "ffffffff-ffff-ffff-ffff-ffffffffffff";

enum class Backend { kEmbedded, kQdrant };

struct Unref {
  void operator()(principal* p) const { principal_unref(p); }
};
using Principal = std::unique_ptr<principal, Unref>;

char** StrArray(const std::vector<std::string>& v) {
  char** out = static_cast<char**>(calloc(v.size() + 1, sizeof(char*)));
  for (size_t i = 0; i < v.size(); i++) out[i] = strdup(v[i].c_str());
  return out;
}

// A caller of tenant t1 holding scopes, reading up to clr.
Principal Caller(const std::string& sub, const std::vector<std::string>& scopes,
                 jwt_label clr = JWT_LABEL_SECRET) {
  jwt_claims* c = static_cast<jwt_claims*>(calloc(1, sizeof(jwt_claims)));
  c->sub = strdup(sub.c_str());
  c->tenant = strdup(kTenant);
  c->jti = strdup(("j-" + sub).c_str());
  c->scopes = StrArray(scopes);
  c->nscopes = scopes.size();
  c->clr = clr;
  c->lvl = JWT_LABEL_PUBLIC;
  c->exp = 4102444800;
  return Principal(principal_create(c));
}

// One call's context (tier "episodic" unless told) and its arena.
struct Call {
  explicit Call(const principal* p, const char* tier = "episodic") : ar(arena_create()) {
    tier_ctx_make(&c, tier, p, clock_mono_ms(nullptr) + 10000, ar);
  }
  ~Call() { arena_free(ar); }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  arena* ar;
  tier_ctx c;
};

vs_id Num(uint64_t n) {
  vs_id id = {};
  id.num = n;
  return id;
}

vs_id Uuid(const char* u) {
  vs_id id = {};
  EXPECT_EQ(0, vs_uuid_parse(u, &id)) << u;
  return id;
}

std::string Text(const vs_id& id) {
  char buf[37];
  return vs_id_text(&id, buf);
}

// A point to write: id, payload JSON, requested label.
struct In {
  vs_id id;
  std::string payload;
  int label;
};

// What a scroll handed out, copied out of the arena and the payloads.
struct Got {
  std::string id;
  std::string payload;  // compact, sorted keys; "" when none was handed out
  std::string owner;
  int label;
  int64_t version;
};

// What an export emitted.
struct Rec {
  std::string kind, id, json, tenant, owner;
  int label;
  int64_t version;
};

// The payload:{"subject_id": s} filter, as a caller builds it.
struct SubjectFilter {
  explicit SubjectFilter(const char* subject) {
    google__protobuf__value__init(&v);
    v.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
    v.string_value = const_cast<char*>(subject);
    memory__v1__field_condition__init(&fc);
    fc.key = const_cast<char*>("subject_id");
    fc.condition_case = MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_VALUE;
    fc.match_value = &v;
    memory__v1__condition__init(&cond);
    cond.condition_case = MEMORY__V1__CONDITION__CONDITION_FIELD;
    cond.field = &fc;
    must[0] = &cond;
    memory__v1__filter__init(&f);
    f.n_must = 1;
    f.must = must;
  }
  SubjectFilter(const SubjectFilter&) = delete;
  SubjectFilter& operator=(const SubjectFilter&) = delete;
  Google__Protobuf__Value v;
  Memory__V1__FieldCondition fc;
  Memory__V1__Condition cond;
  Memory__V1__Condition* must[1];
  Memory__V1__Filter f;
};

// a and b as the same JSON value (key order is the store's: jsonb sorts
// keys by length first).
::testing::AssertionResult SameJson(const std::string& a, const std::string& b) {
  json_error_t e;
  json_t* x = json_loads(a.c_str(), 0, &e);
  json_t* y = json_loads(b.c_str(), 0, &e);
  bool same = x && y && json_equal(x, y);
  json_decref(x);
  json_decref(y);
  if (same) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " is not " << b;
}

// The stand-in's recorded spec violations, "[]" when there were none.
std::string CleanViolations(QdrantStandin& q) {
  std::string v = q.Violations();
  v.erase(v.find_last_not_of(" \r\n") + 1);
  return v;
}

class EpisodicScrollTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.ok()) << db_.error();
    PGconn* conn = PQconnectdb(db_.url().c_str());
    ASSERT_EQ(CONNECTION_OK, PQstatus(conn)) << PQerrorMessage(conn);
    int applied = 0;
    char err[512] = "";
    int rc =
        pg_migrate(conn, memoryd_migrations, memoryd_migrations_count, &applied, err, sizeof err);
    PQfinish(conn);
    ASSERT_EQ(0, rc) << err;
    ASSERT_EQ(0, pg_pool_create(db_.url().c_str(), 4, 5, &pool_, err, sizeof err)) << err;
    if (GetParam() == Backend::kQdrant) {
      ASSERT_TRUE(qdrant_.Start()) << qdrant_.Log();
      std::string url = qdrant_.url();
      qdrant_options o = {};
      o.url = url.c_str();
      ASSERT_EQ(0, qdrant_store_open(pool_, &o, &vs_, err, sizeof err)) << err;
    } else {
      ASSERT_EQ(0, episodic_embedded_open(pool_, 0, nullptr, &vs_));
    }
    alice_ = Caller("alice", {"episodic:read", "episodic:write"});
    bob_ = Caller("bob", {"episodic:read", "episodic:write"});
  }

  void TearDown() override {
    vstore_free(vs_);
    pg_pool_free(pool_);
    // Every request the backend sent must have matched Qdrant's published
    // spec.
    if (GetParam() == Backend::kQdrant) {
      EXPECT_EQ("[]", CleanViolations(qdrant_));
    }
  }

  // Creates collection name (2 dims, cosine) as alice.
  vs_collection Create(const std::string& name) {
    Call k(alice_.get());
    vs_collection col = {};
    EXPECT_EQ(STATUS_OK,
              vstore_create_collection(vs_, &k.c, name.c_str(), 2, VS_COSINE, nullptr, &col))
        << k.c.err;
    names_.push_back(name);
    col.name = names_.back().c_str();  // outlives the call's arena
    col.owner = nullptr;
    return col;
  }

  // Writes pts into col as owner.
  void Put(const principal* owner, const vs_collection& col, const std::vector<In>& pts) {
    static const float kVec[2] = {0.6f, 0.8f};  // unit length, as the service normalizes
    std::vector<vs_point_in> in(pts.size());
    std::vector<json_t*> payloads;
    for (size_t i = 0; i < pts.size(); i++) {
      json_error_t jerr;
      json_t* p = json_loads(pts[i].payload.c_str(), 0, &jerr);
      ASSERT_NE(nullptr, p) << pts[i].payload;
      payloads.push_back(p);
      in[i] = {};
      in[i].id = pts[i].id;
      in[i].vector = kVec;
      in[i].payload = p;
      in[i].label = pts[i].label;
    }
    Call k(owner);
    int rc = vstore_upsert(vs_, &k.c, &col, in.data(), in.size());
    for (json_t* p : payloads) json_decref(p);
    ASSERT_EQ(STATUS_OK, rc) << k.c.err;
  }

  // Points 1..n of owner with payload {"n": i, "subject_id": subject}.
  void PutRange(const principal* owner, const vs_collection& col, uint64_t from, uint64_t to,
                const std::string& subject = "s1", int label = JWT_LABEL_PUBLIC) {
    std::vector<In> pts;
    for (uint64_t i = from; i <= to; i++)
      pts.push_back(
          {Num(i), "{\"n\":" + std::to_string(i) + ",\"subject_id\":\"" + subject + "\"}", label});
    Put(owner, col, pts);
  }

  // One scroll page as reader; status into *rc when asked, else expected OK.
  std::vector<Got> Scroll(const principal* reader, const vs_collection& col, const vs_id* after,
                          size_t limit, const Memory__V1__Filter* filter = nullptr,
                          int with_payload = 1, int* rc_out = nullptr) {
    Call k(reader);
    vs_point* pts = nullptr;
    size_t n = 0;
    int rc = vstore_scroll(vs_, &k.c, &col, filter, after, limit, with_payload, &pts, &n);
    if (rc_out) {
      *rc_out = rc;
    } else {
      EXPECT_EQ(STATUS_OK, rc) << status_name(rc) << ": " << k.c.err;
    }
    std::vector<Got> out;
    for (size_t i = 0; i < n; i++) {
      Got g;
      g.id = Text(pts[i].id);
      if (pts[i].payload) {
        char* s = json_dumps(pts[i].payload, JSON_COMPACT | JSON_SORT_KEYS);
        g.payload = s;
        free(s);
      }
      g.owner = pts[i].meta.owner ? pts[i].meta.owner : "";
      g.label = pts[i].meta.label;
      g.version = pts[i].meta.version;
      EXPECT_EQ(nullptr, pts[i].vector) << "a scroll reads no vectors";
      out.push_back(g);
    }
    vs_points_release(pts, n);
    return out;
  }

  // Every page of a walk with limit per page, ids only.
  std::vector<std::string> Walk(const principal* reader, const vs_collection& col, size_t limit,
                                const Memory__V1__Filter* filter = nullptr) {
    std::vector<std::string> ids;
    vs_id after = {};
    bool has_after = false;
    for (int pages = 0; pages < 1000; pages++) {
      std::vector<Got> page = Scroll(reader, col, has_after ? &after : nullptr, limit, filter, 0);
      for (const Got& g : page) ids.push_back(g.id);
      if (page.size() < limit) break;
      EXPECT_EQ(0, vs_id_parse(page.back().id.c_str(), &after));
      has_after = true;
    }
    return ids;
  }

  // What episodic_export hands over for sel, as Privacy.Export runs it:
  // the selection's principal, :own breadth when it names an owner; emit
  // answers stop_with from the stop_at-th record on (0: never).
  std::vector<Rec> Export(const tier_erase_sel& sel, int* rc_out = nullptr, size_t stop_at = 0,
                          int stop_with = STATUS_OK, size_t* arena_bytes = nullptr) {
    Principal ep(tier_erase_principal(&sel));
    EXPECT_NE(nullptr, ep);
    Call k(ep.get(), "privacy");
    k.c.read_breadth = k.c.write_breadth = sel.owner ? PRINCIPAL_OWN : PRINCIPAL_ALL;
    struct Sink {
      std::vector<Rec> recs;
      size_t stop_at;
      int stop_with;
    } sink = {{}, stop_at, stop_with};
    tier_export_emit emit = [](void* arg, const tier_export_rec* r) -> int {
      Sink* s = static_cast<Sink*>(arg);
      Rec rec;
      rec.kind = r->kind;
      rec.id = r->id;
      rec.json = r->json;
      rec.tenant = r->meta->tenant ? r->meta->tenant : "";
      rec.owner = r->meta->owner ? r->meta->owner : "";
      rec.label = r->meta->label;
      rec.version = r->meta->version;
      s->recs.push_back(rec);
      return s->stop_at && s->recs.size() >= s->stop_at ? s->stop_with : STATUS_OK;
    };
    int rc = episodic_export(vs_, &k.c, &sel, emit, &sink);
    if (arena_bytes) *arena_bytes = arena_used(k.ar);
    if (rc_out) {
      *rc_out = rc;
    } else {
      EXPECT_EQ(STATUS_OK, rc) << status_name(rc) << ": " << k.c.err;
    }
    return sink.recs;
  }

  static std::vector<std::string> Ids(const std::vector<Got>& g) {
    std::vector<std::string> ids;
    for (const Got& x : g) ids.push_back(x.id);
    return ids;
  }
  static std::vector<std::string> Ids(const std::vector<Rec>& r) {
    std::vector<std::string> ids;
    for (const Rec& x : r) ids.push_back(x.id);
    return ids;
  }

  PgTestDb db_;
  pg_pool* pool_ = nullptr;
  QdrantStandin qdrant_;
  vstore* vs_ = nullptr;
  Principal alice_, bob_;
  std::list<std::string> names_;  // collection names: a list keeps c_str() stable
};

using V = std::vector<std::string>;

// ---- vstore_scroll ----

TEST_P(EpisodicScrollTest, ScrollHandsOutPointsInIdOrderIntegersBeforeUuids) {
  vs_collection col = Create("docs");
  Put(alice_.get(), col,
      {{Uuid(kUuidB), "{\"k\":\"b\"}", 0},
       {Num(30), "{\"k\":30}", 0},
       {Uuid(kUuidA), "{\"k\":\"a\"}", 0},
       {Num(2), "{\"k\":2}", 0},
       {Num(100), "{}", 0}});
  EXPECT_EQ((V{"2", "30", "100", kUuidA, kUuidB}), Ids(Scroll(alice_.get(), col, nullptr, 10)));
}

TEST_P(EpisodicScrollTest, ScrollPagesByCursorAndLimit) {
  vs_collection col = Create("docs");
  PutRange(alice_.get(), col, 1, 7);
  EXPECT_EQ((V{"1", "2", "3"}), Ids(Scroll(alice_.get(), col, nullptr, 3)));
  vs_id after = Num(3);
  EXPECT_EQ((V{"4", "5", "6"}), Ids(Scroll(alice_.get(), col, &after, 3)));
  after = Num(6);
  EXPECT_EQ((V{"7"}), Ids(Scroll(alice_.get(), col, &after, 3)));
  after = Num(7);
  EXPECT_TRUE(Scroll(alice_.get(), col, &after, 3).empty());
  EXPECT_EQ((V{"1", "2", "3", "4", "5", "6", "7"}), Walk(alice_.get(), col, 2));
}

TEST_P(EpisodicScrollTest, ScrollCursorNeedNotBeAStoredId) {
  vs_collection col = Create("docs");
  Put(alice_.get(), col, {{Num(10), "{}", 0}, {Num(20), "{}", 0}, {Uuid(kUuidA), "{}", 0}});
  vs_id after = Num(15);
  EXPECT_EQ((V{"20", kUuidA}), Ids(Scroll(alice_.get(), col, &after, 5)));
  after = Num(UINT64_MAX);  // the next id is the nil UUID
  EXPECT_EQ((V{kUuidA}), Ids(Scroll(alice_.get(), col, &after, 5)));
  after = Uuid(kNilUuid);
  EXPECT_EQ((V{kUuidA}), Ids(Scroll(alice_.get(), col, &after, 5)));
  after = Uuid(kUuidA);
  EXPECT_TRUE(Scroll(alice_.get(), col, &after, 5).empty());
  after = Uuid(kMaxUuid);  // nothing can follow
  EXPECT_TRUE(Scroll(alice_.get(), col, &after, 5).empty());
}

TEST_P(EpisodicScrollTest, ScrollHidesOtherOwnersPointsWithoutReadAll) {
  vs_collection col = Create("docs");
  PutRange(alice_.get(), col, 1, 2);
  PutRange(bob_.get(), col, 3, 4);
  PutRange(alice_.get(), col, 5, 6);
  // Pages stay full: the hidden points are left out inside the backend.
  EXPECT_EQ((V{"1", "2", "5"}), Ids(Scroll(alice_.get(), col, nullptr, 3)));
  EXPECT_EQ((V{"1", "2", "5", "6"}), Walk(alice_.get(), col, 2));
  EXPECT_EQ((V{"3", "4"}), Walk(bob_.get(), col, 1));
  Principal all = Caller("carol", {"episodic:read:all"});
  std::vector<Got> every = Scroll(all.get(), col, nullptr, 10);
  EXPECT_EQ((V{"1", "2", "3", "4", "5", "6"}), Ids(every));
  EXPECT_EQ("bob", every[2].owner);
}

TEST_P(EpisodicScrollTest, ScrollHidesLabelsAboveTheReadCeiling) {
  vs_collection col = Create("docs");
  Put(alice_.get(), col,
      {{Num(1), "{}", JWT_LABEL_PUBLIC},
       {Num(2), "{}", JWT_LABEL_SECRET},
       {Num(3), "{}", JWT_LABEL_INTERNAL},
       {Num(4), "{}", JWT_LABEL_CONFIDENTIAL},
       {Num(5), "{}", JWT_LABEL_PUBLIC}});
  Principal low = Caller("alice", {"episodic:read"}, JWT_LABEL_INTERNAL);
  std::vector<Got> page = Scroll(low.get(), col, nullptr, 3);
  EXPECT_EQ((V{"1", "3", "5"}), Ids(page));
  EXPECT_EQ(JWT_LABEL_INTERNAL, page[1].label);
  Principal low_all = Caller("carol", {"episodic:read:all"}, JWT_LABEL_INTERNAL);
  EXPECT_EQ((V{"1", "3", "5"}), Walk(low_all.get(), col, 1));
  EXPECT_EQ((V{"1", "2", "3", "4", "5"}), Walk(alice_.get(), col, 2));
}

TEST_P(EpisodicScrollTest, ScrollFilterNarrowsThePages) {
  vs_collection col = Create("docs");
  Put(alice_.get(), col,
      {{Num(1), "{\"subject_id\":\"s1\"}", 0},
       {Num(2), "{\"subject_id\":\"s2\"}", 0},
       {Num(3), "{\"subject_id\":\"s1\"}", 0},
       {Num(4), "{\"other\":\"s1\"}", 0},
       {Num(5), "{\"subject_id\":\"s1\"}", 0},
       {Num(6), "{\"subject_id\":1}", 0}});
  SubjectFilter s1("s1");
  EXPECT_EQ((V{"1", "3"}), Ids(Scroll(alice_.get(), col, nullptr, 2, &s1.f)));
  vs_id after = Num(3);
  EXPECT_EQ((V{"5"}), Ids(Scroll(alice_.get(), col, &after, 2, &s1.f)));
  EXPECT_EQ((V{"1", "3", "5"}), Walk(alice_.get(), col, 1, &s1.f));
}

TEST_P(EpisodicScrollTest, ScrollHandsOutPayloadsAndMetadataOnlyWhenAsked) {
  vs_collection col = Create("docs");
  Put(alice_.get(), col,
      {{Num(1), "{\"a\":{\"b\":[1,2]},\"subject_id\":\"s1\"}", JWT_LABEL_INTERNAL},
       {Num(2), "{}", 0}});
  std::vector<Got> with = Scroll(alice_.get(), col, nullptr, 5, nullptr, 1);
  ASSERT_EQ(2u, with.size());
  EXPECT_EQ("{\"a\":{\"b\":[1,2]},\"subject_id\":\"s1\"}", with[0].payload);
  EXPECT_EQ("{}", with[1].payload);
  EXPECT_EQ("alice", with[0].owner);
  EXPECT_EQ(JWT_LABEL_INTERNAL, with[0].label);
  EXPECT_EQ(1, with[0].version);
  std::vector<Got> without = Scroll(alice_.get(), col, nullptr, 5, nullptr, 0);
  ASSERT_EQ(2u, without.size());
  EXPECT_EQ("", without[0].payload);
  EXPECT_EQ("alice", without[0].owner);
}

TEST_P(EpisodicScrollTest, ScrollSeesWritesAndDeletesBetweenPages) {
  vs_collection col = Create("docs");
  PutRange(alice_.get(), col, 1, 4);
  EXPECT_EQ((V{"1", "2"}), Ids(Scroll(alice_.get(), col, nullptr, 2)));
  // Changed after the first page (the embedded index catches up).
  Put(alice_.get(), col, {{Num(3), "{\"n\":33}", 0}, {Num(9), "{}", 0}});
  {
    Call k(alice_.get());
    vs_id del = Num(4);
    int64_t deleted = 0;
    ASSERT_EQ(STATUS_OK, vstore_delete_ids(vs_, &k.c, &col, &del, 1, &deleted)) << k.c.err;
    EXPECT_EQ(1, deleted);
  }
  vs_id after = Num(2);
  std::vector<Got> next = Scroll(alice_.get(), col, &after, 2);
  EXPECT_EQ((V{"3", "9"}), Ids(next));
  EXPECT_EQ("{\"n\":33}", next[0].payload);
  EXPECT_EQ(2, next[0].version);
}

TEST_P(EpisodicScrollTest, ScrollLimitZeroIsEmptyAndAboveTheMaximumRefused) {
  vs_collection col = Create("docs");
  PutRange(alice_.get(), col, 1, 2);
  int rc = -100;
  EXPECT_TRUE(Scroll(alice_.get(), col, nullptr, 0, nullptr, 1, &rc).empty());
  EXPECT_EQ(STATUS_OK, rc);
  EXPECT_TRUE(Scroll(alice_.get(), col, nullptr, VS_SCROLL_MAX + 1, nullptr, 1, &rc).empty());
  EXPECT_EQ(STATUS_EINVALID, rc);
  EXPECT_EQ((V{"1", "2"}), Ids(Scroll(alice_.get(), col, nullptr, VS_SCROLL_MAX)));
}

TEST_P(EpisodicScrollTest, ScrollOfADeletedCollectionIsNotFound) {
  vs_collection col = Create("docs");
  PutRange(alice_.get(), col, 1, 2);
  {
    Call k(alice_.get());
    ASSERT_EQ(STATUS_OK, vstore_delete_collection(vs_, &k.c, "docs")) << k.c.err;
  }
  int rc = STATUS_OK;
  EXPECT_TRUE(Scroll(alice_.get(), col, nullptr, 5, nullptr, 1, &rc).empty());
  EXPECT_EQ(STATUS_ENOTFOUND, rc);
}

// ---- episodic_export ----

TEST_P(EpisodicScrollTest, ExportEmitsTheSubjectsPointsOfEveryCollection) {
  vs_collection a = Create("a-notes");
  vs_collection b = Create("b-notes");
  Create("c-empty");
  Put(alice_.get(), b,
      {{Num(7), "{\"subject_id\":\"s1\",\"x\":1}", JWT_LABEL_INTERNAL},
       {Num(8), "{\"subject_id\":\"s2\"}", 0},
       {Uuid(kUuidA), "{\"subject_id\":\"s1\"}", 0}});
  Put(bob_.get(), a, {{Num(1), "{\"subject_id\":\"s1\"}", 0}, {Num(2), "{}", 0}});
  tier_erase_sel sel = {};
  sel.tenant = kTenant;
  sel.subject_id = "s1";
  std::vector<Rec> recs = Export(sel);
  EXPECT_EQ((V{"a-notes/1", "b-notes/7", std::string("b-notes/") + kUuidA}), Ids(recs));
  ASSERT_EQ(3u, recs.size());
  EXPECT_EQ("point", recs[1].kind);
  EXPECT_TRUE(SameJson("{\"subject_id\":\"s1\",\"x\":1}", recs[1].json));
  EXPECT_EQ(kTenant, recs[1].tenant);
  EXPECT_EQ("alice", recs[1].owner);
  EXPECT_EQ(JWT_LABEL_INTERNAL, recs[1].label);
  EXPECT_EQ(1, recs[1].version);
  EXPECT_EQ("bob", recs[0].owner);
  for (const Rec& r : recs) EXPECT_EQ(kTenant, r.tenant) << r.id;
}

TEST_P(EpisodicScrollTest, ExportOfAnOwnerKeepsToTheOwnersPoints) {
  vs_collection col = Create("docs");
  Put(alice_.get(), col, {{Num(1), "{\"subject_id\":\"s1\"}", 0}, {Num(3), "{}", 0}});
  Put(bob_.get(), col, {{Num(2), "{\"subject_id\":\"s1\"}", 0}});
  tier_erase_sel sel = {};
  sel.tenant = kTenant;
  sel.owner = "alice";
  std::vector<Rec> recs = Export(sel);
  EXPECT_EQ((V{"docs/1", "docs/3"}), Ids(recs));
  ASSERT_EQ(2u, recs.size());
  EXPECT_EQ("{}", recs[1].json);
  sel.subject_id = "s1";
  EXPECT_EQ((V{"docs/1"}), Ids(Export(sel)));
}

TEST_P(EpisodicScrollTest, ExportKeepsTheCallersReadCeiling) {
  vs_collection col = Create("docs");
  Put(alice_.get(), col,
      {{Num(1), "{\"subject_id\":\"s1\"}", JWT_LABEL_PUBLIC},
       {Num(2), "{\"subject_id\":\"s1\"}", JWT_LABEL_SECRET},
       {Num(3), "{\"subject_id\":\"s1\"}", JWT_LABEL_INTERNAL}});
  tier_erase_sel sel = {};
  sel.tenant = kTenant;
  sel.subject_id = "s1";
  sel.max_label = JWT_LABEL_INTERNAL;
  EXPECT_EQ((V{"docs/1", "docs/3"}), Ids(Export(sel)));
}

TEST_P(EpisodicScrollTest, ExportPagesThroughLargeCollectionsOncePageAtATime) {
  vs_collection col = Create("docs");
  PutRange(alice_.get(), col, 1, 600);  // past two pages of 256
  PutRange(alice_.get(), col, 601, 610, "s2");
  tier_erase_sel sel = {};
  sel.tenant = kTenant;
  sel.subject_id = "s1";
  size_t bytes = 0;
  std::vector<Rec> recs = Export(sel, nullptr, 0, STATUS_OK, &bytes);
  ASSERT_EQ(600u, recs.size());
  // The pages lived in the exporter's own arena: the call's holds the
  // collection listing only, not 600 points.
  EXPECT_LT(bytes, 4096u);
  for (size_t i = 0; i < recs.size(); i++)
    ASSERT_EQ("docs/" + std::to_string(i + 1), recs[i].id) << i;
  EXPECT_TRUE(SameJson("{\"n\":600,\"subject_id\":\"s1\"}", recs[599].json));
}

TEST_P(EpisodicScrollTest, ExportStopsAtTheFirstEmitError) {
  vs_collection a = Create("a");
  vs_collection b = Create("b");
  PutRange(alice_.get(), a, 1, 3);
  PutRange(alice_.get(), b, 1, 3);
  tier_erase_sel sel = {};
  sel.tenant = kTenant;
  sel.owner = "alice";
  int rc = STATUS_OK;
  std::vector<Rec> recs = Export(sel, &rc, 4, STATUS_ECANCELLED);
  EXPECT_EQ(STATUS_ECANCELLED, rc);
  EXPECT_EQ((V{"a/1", "a/2", "a/3", "b/1"}), Ids(recs));
}

TEST_P(EpisodicScrollTest, ExportOfARetentionRuleIsEmpty) {
  vs_collection col = Create("docs");
  PutRange(alice_.get(), col, 1, 3);
  tier_erase_sel sel = {};
  sel.tenant = kTenant;
  sel.before_us = clock_wall_us() + 1000000;
  EXPECT_TRUE(Export(sel).empty());
  sel.before_us = 0;
  sel.pii_kind = "*";
  EXPECT_TRUE(Export(sel).empty());
}

TEST_P(EpisodicScrollTest, EraseStillTakesTheSubjectsPointsOnly) {
  // The subject filter is shared with the exporter: erasure is unchanged.
  vs_collection col = Create("docs");
  Put(alice_.get(), col,
      {{Num(1), "{\"subject_id\":\"s1\"}", 0},
       {Num(2), "{\"subject_id\":\"s2\"}", 0},
       {Num(3), "{\"subject_id\":\"s1\"}", 0}});
  tier_erase_sel sel = {};
  sel.tenant = kTenant;
  sel.subject_id = "s1";
  Principal ep(tier_erase_principal(&sel));
  Call k(ep.get(), "privacy");
  k.c.read_breadth = k.c.write_breadth = PRINCIPAL_ALL;
  int64_t n = -1;
  ASSERT_EQ(STATUS_OK, episodic_erase(vs_, &k.c, &sel, &n)) << k.c.err;
  EXPECT_EQ(2, n);
  EXPECT_EQ((V{"2"}), Walk(alice_.get(), col, 10));
}

INSTANTIATE_TEST_SUITE_P(Backends, EpisodicScrollTest,
                         ::testing::Values(Backend::kEmbedded, Backend::kQdrant),
                         [](const ::testing::TestParamInfo<Backend>& i) {
                           return i.param == Backend::kEmbedded ? std::string("Embedded")
                                                                : std::string("Qdrant");
                         });

}  // namespace
