// The blackboard's eraser (bb_erase_tenant, for Privacy.Forget) against
// the real Redis of `make test`, and private ones the fault tests stop or
// freeze: by owner, by subject id, both, dry runs, every board of the
// tenant and no other tenant's, labels ignored, and each erased key a
// delete like a post's (revision, change log, published event). And its
// exporter (bb_export_tenant, for Privacy.Export): the same selection,
// read, within the read ceiling, changing nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/pg_testdb.h"
#include "tests/testing/redis_server.h"

extern "C" {
#include "service/blackboard/bb_codec.h"
#include "service/blackboard/bb_store.h"
#include "service/core/arena.h"
#include "service/core/clock.h"
#include "service/core/status.h"
#include "service/pii/pii.h"
#include "service/store/aredis.h"
#include "service/store/evloop.h"
#include "service/store/redis_pool.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_erase.h"
}

namespace {

int64_t NowMs() { return clock_mono_ms(nullptr); }

// Tenants unique to this run: the shared Redis outlives test runs.
std::string Tenant(const std::string& name) {
  static const std::string run = std::to_string(getpid()) + "-" + std::to_string(NowMs());
  return name + "-" + run;
}

// Boards expire two minutes after the test; the log keeps every event.
const bb_limits kLimits = {1000, 1 << 20, 120000, 1000, 1 << 20, nullptr};

// One post through the store, as the service sends it, and its answer.
struct PostWait {
  bb_post p{};  // first: the done finds the wait
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int status = 1;
};

// What an erasure answered.
struct Erased {
  int status;
  int64_t count;
  std::string err;
};

// One record an export handed over, copied out of the emit call.
struct Record {
  std::string kind, id, json, tenant, owner;
  int label = 0;
  int64_t version = 0, create_us = 0, update_us = 0, expire_us = 0;
  std::vector<std::string> pii;
};

// What an export answered: its code and the records emitted, in order.
struct Exported {
  int status = 1;
  std::string err;
  std::vector<Record> records;
  int fail_at = -1;  // the emit call (0-based) that answers fail_code
  int fail_code = STATUS_OK;
  int calls = 0;

  // The records' ids, sorted.
  std::vector<std::string> Ids() const {
    std::vector<std::string> ids;
    for (const auto& r : records) ids.push_back(r.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  const Record* Find(const std::string& id) const {
    for (const auto& r : records)
      if (r.id == id) return &r;
    return nullptr;
  }
};

int Collect(void* arg, const tier_export_rec* r) {
  Exported* x = static_cast<Exported*>(arg);
  if (x->calls++ == x->fail_at) return x->fail_code;
  Record rec;
  rec.kind = r->kind;
  rec.id = r->id;
  rec.json = r->json;
  rec.tenant = r->meta->tenant;
  rec.owner = r->meta->owner;
  rec.label = r->meta->label;
  rec.version = r->meta->version;
  rec.create_us = r->meta->create_us;
  rec.update_us = r->meta->update_us;
  rec.expire_us = r->meta->has_expire ? r->meta->expire_us : 0;
  for (size_t i = 0; i < r->meta->npii; i++) rec.pii.emplace_back(r->meta->pii_kinds[i]);
  x->records.push_back(rec);
  return STATUS_OK;
}

class BbEraseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = TestRedisUrl();
    ASSERT_FALSE(url_.empty()) << "MEMORYD_TEST_REDIS_URL is not set: run `make test`";
    Open(url_);
  }
  void TearDown() override { Close(); }

  void Open(const std::string& url) {
    char err[256];
    ASSERT_EQ(0, evloop_create("test", &loop_, err, sizeof err)) << err;
    aredis_options o = {};
    o.url = url.c_str();
    o.connect_timeout_ms = 1000;
    o.default_timeout_ms = 5000;
    o.max_in_flight = 1024;
    ASSERT_EQ(0, aredis_create(loop_, &o, &aredis_, err, sizeof err)) << err;
    // The pool's own timeout is well past the deadlines the fault tests
    // give, so what ends their waits is the deadline.
    ASSERT_EQ(0, redis_pool_create(url.c_str(), 2, 10000, &pool_, err, sizeof err)) << err;
  }
  void Close() {
    aredis_free(aredis_);
    evloop_free(loop_);
    redis_pool_free(pool_);
    aredis_ = nullptr;
    loop_ = nullptr;
    pool_ = nullptr;
  }

  // Posts key (or deletes it with json "") on tenant's board of task as
  // owner; the status.
  int Post(const std::string& tenant, const std::string& task, const std::string& key,
           const std::string& owner, const std::string& json, int label = 1, int64_t lease_ms = 0,
           unsigned pii = 0) {
    arena* a = arena_create();
    bb_names n;
    EXPECT_EQ(0, bb_names_make(a, tenant.c_str(), task.c_str(), &n));
    PostWait w;
    w.p.done = [](bb_post* p, int status) {
      PostWait* pw = reinterpret_cast<PostWait*>(p);
      std::lock_guard<std::mutex> g(pw->mu);
      pw->status = status;
      pw->done = true;
      pw->cv.notify_all();
    };
    bb_caller c = {};
    c.sub = owner.c_str();
    c.clr = 4;
    bb_post_in in = {};
    in.key = key.c_str();
    in.del = json.empty();
    in.json = json.empty() ? nullptr : json.c_str();
    in.json_len = json.size();
    in.label = label;
    in.lease_ms = lease_ms;
    in.pii = pii;
    in.size = static_cast<int64_t>(json.size() + key.size() + owner.size() + 96);
    in.id_random = 0xbeef;
    EXPECT_EQ(0, bb_post_start(&w.p, aredis_, a, &n, &kLimits, &c, &in, NowMs() + 5000));
    {
      std::unique_lock<std::mutex> g(w.mu);
      EXPECT_TRUE(w.cv.wait_for(g, std::chrono::seconds(10), [&] { return w.done; }));
    }
    EXPECT_EQ(STATUS_OK, w.status) << key << ": " << w.p.err;
    last_board_id_ = w.status == STATUS_OK ? w.p.board_id : "";
    last_created_ = w.p.created;
    arena_free(a);
    return w.status;
  }

  Erased Erase(const std::string& tenant, const char* owner, const char* subject,
               bool dry_run = false, int64_t deadline_ms = -1) {
    tier_erase_sel sel = {};
    sel.tenant = tenant.c_str();
    sel.owner = owner;
    sel.subject_id = subject;
    sel.dry_run = dry_run ? 1 : 0;
    principal* p = tier_erase_principal(&sel);
    EXPECT_NE(nullptr, p);
    arena* a = arena_create();
    tier_ctx c;
    tier_ctx_make(&c, "blackboard", p, deadline_ms >= 0 ? deadline_ms : NowMs() + 10000, a);
    Erased e;
    e.count = -1;
    e.status = bb_erase_tenant(pool_, &kLimits, &c, &sel, &e.count);
    e.err = c.err;
    arena_free(a);
    principal_unref(p);
    return e;
  }

  // Exports tenant's items of owner and/or subject within max_label (0:
  // any); x may say which emit call fails.
  Exported Export(const std::string& tenant, const char* owner, const char* subject,
                  int max_label = 0, Exported x = Exported(), int64_t deadline_ms = -1) {
    tier_erase_sel sel = {};
    sel.tenant = tenant.c_str();
    sel.owner = owner;
    sel.subject_id = subject;
    sel.max_label = max_label;
    return ExportSel(sel, std::move(x), deadline_ms);
  }
  Exported ExportSel(const tier_erase_sel& sel, Exported x = Exported(), int64_t deadline_ms = -1) {
    principal* p = tier_erase_principal(&sel);
    EXPECT_NE(nullptr, p);
    arena* a = arena_create();
    tier_ctx c;
    tier_ctx_make(&c, "blackboard", p, deadline_ms >= 0 ? deadline_ms : NowMs() + 10000, a);
    x.status = bb_export_tenant(pool_, &c, &sel, Collect, &x);
    x.err = c.err;
    arena_free(a);
    principal_unref(p);
    return x;
  }

  // A command on a pooled connection; the reply (freeReplyObject it).
  redisReply* Command(const std::vector<std::string>& words) {
    char err[256];
    redisContext* rc = redis_pool_acquire(pool_, NowMs() + 5000, err, sizeof err);
    EXPECT_NE(nullptr, rc) << err;
    if (!rc) return nullptr;
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& w : words) {
      argv.push_back(w.c_str());
      lens.push_back(w.size());
    }
    redisReply* r = static_cast<redisReply*>(
        redisCommandArgv(rc, static_cast<int>(argv.size()), argv.data(), lens.data()));
    redis_pool_release(pool_, rc, r == nullptr);
    EXPECT_NE(nullptr, r);
    return r;
  }

  std::string Base(const std::string& tenant, const std::string& task) {
    return "memoryd:bb:{" + std::to_string(tenant.size()) + ":" + tenant + ":" + task + "}";
  }

  // The board's revision (0 without a board).
  int64_t Revision(const std::string& tenant, const std::string& task) {
    redisReply* r = Command({"HGET", Base(tenant, task) + ":m", "r"});
    int64_t rev = r && r->type == REDIS_REPLY_STRING ? std::stoll(std::string(r->str, r->len)) : 0;
    if (r) freeReplyObject(r);
    return rev;
  }

  // The board's keys, sorted.
  std::vector<std::string> Keys(const std::string& tenant, const std::string& task) {
    redisReply* r = Command({"HKEYS", Base(tenant, task) + ":k"});
    std::vector<std::string> keys;
    for (size_t i = 0; r && i < r->elements; i++)
      keys.emplace_back(r->element[i]->str, r->element[i]->len);
    if (r) freeReplyObject(r);
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  // The board's change log, raw.
  std::vector<std::string> Log(const std::string& tenant, const std::string& task) {
    redisReply* r = Command({"LRANGE", Base(tenant, task) + ":l", "0", "-1"});
    std::vector<std::string> log;
    for (size_t i = 0; r && i < r->elements; i++)
      log.emplace_back(r->element[i]->str, r->element[i]->len);
    if (r) freeReplyObject(r);
    return log;
  }

  std::string url_;
  evloop* loop_ = nullptr;
  aredis* aredis_ = nullptr;
  redis_pool* pool_ = nullptr;
  std::string last_board_id_;
  int last_created_ = 0;
};

TEST_F(BbEraseTest, ByOwnerErasesTheOwnersKeysOnEveryBoardAndNoOthers) {
  std::string t = Tenant("owner");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  Post(t, "plan", "b1", "bob", "{\"x\":2}");
  Post(t, "notes", "a2", "alice", "\"text\"");
  Post(t, "notes", "a3", "alice", "{\"subject_id\":\"s1\"}");
  Post(t, "review", "b2", "bob", "[1,2]");

  Erased e = Erase(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(3, e.count);
  EXPECT_EQ(std::vector<std::string>{"b1"}, Keys(t, "plan"));
  EXPECT_EQ(std::vector<std::string>{}, Keys(t, "notes"));
  EXPECT_EQ(std::vector<std::string>{"b2"}, Keys(t, "review"));
}

TEST_F(BbEraseTest, BySubjectErasesTopLevelStringMatchesOfEveryOwner) {
  std::string t = Tenant("subject");
  Post(t, "plan", "a1", "alice", "{\"subject_id\":\"s1\",\"step\":1}");
  Post(t, "plan", "b1", "bob", "{\"subject_id\":\"s1\"}");
  Post(t, "other", "b2", "bob", "{\"note\":\"x\",\"subject_id\":\"s1\"}");
  Post(t, "plan", "a2", "alice", "{\"subject_id\":\"s2\"}");
  Post(t, "plan", "a3", "alice", "{\"inner\":{\"subject_id\":\"s1\"}}");  // not top-level
  Post(t, "plan", "a4", "alice", "\"s1\"");                               // not an object
  Post(t, "plan", "a5", "alice", "{\"subject_id\":1}");                   // not a string
  Post(t, "plan", "a6", "alice", "[{\"subject_id\":\"s1\"}]");            // an array
  Post(t, "plan", "a7", "alice", "{\"subject\\u005fid\":\"s1\"}");        // escaped name

  Erased e = Erase(t, nullptr, "s1");
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(4, e.count);
  EXPECT_EQ((std::vector<std::string>{"a2", "a3", "a4", "a5", "a6"}), Keys(t, "plan"));
  EXPECT_EQ(std::vector<std::string>{}, Keys(t, "other"));

  Erased number = Erase(t, nullptr, "1");
  ASSERT_EQ(STATUS_OK, number.status) << number.err;
  EXPECT_EQ(0, number.count);
}

TEST_F(BbEraseTest, OwnerAndSubjectTogetherEraseOnlyKeysMatchingBoth) {
  std::string t = Tenant("both");
  Post(t, "plan", "a1", "alice", "{\"subject_id\":\"s1\"}");
  Post(t, "plan", "a2", "alice", "{\"subject_id\":\"s2\"}");
  Post(t, "plan", "b1", "bob", "{\"subject_id\":\"s1\"}");

  Erased e = Erase(t, "alice", "s1");
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(1, e.count);
  EXPECT_EQ((std::vector<std::string>{"a2", "b1"}), Keys(t, "plan"));
}

TEST_F(BbEraseTest, DryRunCountsWithoutChangingAnything) {
  std::string t = Tenant("dry");
  Post(t, "plan", "a1", "alice", "{\"subject_id\":\"s1\"}");
  Post(t, "plan", "a2", "alice", "{\"x\":1}");
  Post(t, "notes", "a3", "alice", "{\"x\":1}");
  Post(t, "notes", "b1", "bob", "{\"subject_id\":\"s1\"}");
  int64_t rev = Revision(t, "plan");
  size_t log = Log(t, "plan").size();

  Erased owner = Erase(t, "alice", nullptr, true);
  ASSERT_EQ(STATUS_OK, owner.status) << owner.err;
  EXPECT_EQ(3, owner.count);
  Erased subject = Erase(t, nullptr, "s1", true);
  ASSERT_EQ(STATUS_OK, subject.status) << subject.err;
  EXPECT_EQ(2, subject.count);

  EXPECT_EQ(rev, Revision(t, "plan"));
  EXPECT_EQ(log, Log(t, "plan").size());
  EXPECT_EQ((std::vector<std::string>{"a1", "a2"}), Keys(t, "plan"));
  EXPECT_EQ((std::vector<std::string>{"a3", "b1"}), Keys(t, "notes"));
}

TEST_F(BbEraseTest, EachErasedKeyIsADeleteInTheChangeLogAtItsOwnRevision) {
  std::string t = Tenant("log");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  Post(t, "plan", "b1", "bob", "{\"x\":2}");
  Post(t, "plan", "a2", "alice", "{\"x\":3}");
  int64_t rev = Revision(t, "plan");
  ASSERT_EQ(3, rev);

  Erased e = Erase(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  ASSERT_EQ(2, e.count);
  EXPECT_EQ(rev + 2, Revision(t, "plan"));

  // The log lost its PUTs up to alice's last (it would replay them to a
  // stream resuming from before); the erasure's DELETEs follow.
  std::vector<std::string> log = Log(t, "plan");
  ASSERT_EQ(2u, log.size());
  std::vector<std::string> deleted;
  for (size_t i = 0; i < log.size(); i++) {
    bb_event ev;
    ASSERT_EQ(0, bb_event_parse(log[i].data(), log[i].size(), &ev)) << log[i];
    EXPECT_EQ(BB_DELETE, ev.kind);
    EXPECT_EQ(static_cast<int64_t>(i + 4), ev.rev);
    EXPECT_EQ(ev.rev, ev.h.version);
    EXPECT_EQ("alice", std::string(ev.h.owner, ev.h.owner_len));
    EXPECT_EQ(last_board_id_, std::string(ev.id, ev.id_len));
    deleted.emplace_back(ev.key, ev.key_len);
  }
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ((std::vector<std::string>{"a1", "a2"}), deleted);
}

// The change log keeps no PUT carrying a value the erasure selects (the
// erased key's, or an older value of a key that names the subject no
// more): it is cut after the last such PUT, its first revision and bytes
// following, so a resume from before gets a snapshot; later events stay.
TEST_F(BbEraseTest, TheChangeLogLosesEveryPutOfAnErasedValue) {
  std::string t = Tenant("cut");
  Post(t, "plan", "k1", "alice", "{\"subject_id\":\"s1\",\"n\":\"secret-1\"}");
  Post(t, "plan", "k2", "alice", "{\"subject_id\":\"s1\",\"n\":\"secret-2\"}");
  Post(t, "plan", "k2", "alice", "{\"n\":\"plain\"}");  // names s1 no more
  Post(t, "plan", "k3", "bob", "{\"n\":\"bob's\"}");
  Erased e = Erase(t, nullptr, "s1");
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  ASSERT_EQ(1, e.count);  // k1; k2's value now is not s1's

  std::vector<std::string> log = Log(t, "plan");
  std::string kinds, all;
  for (const auto& ev : log) kinds += ev[0], all += ev;
  EXPECT_EQ("PPD", kinds);  // k2's plain PUT, k3's, the erasure's DELETE
  EXPECT_EQ(std::string::npos, all.find("secret")) << all;
  bb_event first;
  ASSERT_EQ(0, bb_event_parse(log[0].data(), log[0].size(), &first));
  EXPECT_EQ(3, first.rev);
  redisReply* r = Command({"HMGET", Base(t, "plan") + ":m", "f", "lb"});
  ASSERT_NE(nullptr, r);
  ASSERT_EQ(2u, r->elements);
  EXPECT_EQ("3", std::string(r->element[0]->str, r->element[0]->len));  // first revision held
  EXPECT_EQ(std::to_string(all.size()), std::string(r->element[1]->str, r->element[1]->len));
  freeReplyObject(r);
}

TEST_F(BbEraseTest, EachErasedKeyIsPublishedAsADelete) {
  std::string t = Tenant("pub");
  Post(t, "plan", "a1", "alice", "{\"subject_id\":\"s1\"}");
  Post(t, "plan", "b1", "bob", "{\"x\":1}");
  char err[256];
  redisContext* sub = redis_pool_open(pool_, err, sizeof err);
  ASSERT_NE(nullptr, sub) << err;
  std::string channel = Base(t, "plan") + ":c";
  redisReply* r =
      static_cast<redisReply*>(redisCommand(sub, "SUBSCRIBE %b", channel.data(), channel.size()));
  ASSERT_NE(nullptr, r);
  freeReplyObject(r);

  Erased e = Erase(t, nullptr, "s1");
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  ASSERT_EQ(1, e.count);

  void* reply = nullptr;
  ASSERT_EQ(REDIS_OK, redisGetReply(sub, &reply)) << sub->errstr;
  r = static_cast<redisReply*>(reply);
  ASSERT_EQ(REDIS_REPLY_ARRAY, r->type);
  ASSERT_EQ(3u, r->elements);
  EXPECT_EQ("message", std::string(r->element[0]->str, r->element[0]->len));
  bb_event ev;
  ASSERT_EQ(0, bb_event_parse(r->element[2]->str, r->element[2]->len, &ev));
  EXPECT_EQ(BB_DELETE, ev.kind);
  EXPECT_EQ("a1", std::string(ev.key, ev.key_len));
  EXPECT_EQ(3, ev.rev);
  freeReplyObject(r);
  redisFree(sub);
}

TEST_F(BbEraseTest, AnErasedKeysEventIsAPostedDeletesEvent) {
  std::string t = Tenant("alike");
  Post(t, "plan", "k1", "alice", "{\"x\":1}");
  Post(t, "plan", "k2", "alice", "{\"x\":1}");
  Post(t, "plan", "k1", "alice", "");  // a post's delete
  Erased e = Erase(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  ASSERT_EQ(1, e.count);

  std::vector<std::string> log = Log(t, "plan");
  ASSERT_EQ(2u, log.size());  // the PUTs of alice's values are gone from it
  bb_event posted, erased;
  ASSERT_EQ(0, bb_event_parse(log[0].data(), log[0].size(), &posted)) << log[0];
  ASSERT_EQ(0, bb_event_parse(log[1].data(), log[1].size(), &erased)) << log[1];
  EXPECT_EQ(BB_DELETE, posted.kind);
  EXPECT_EQ(BB_DELETE, erased.kind);
  EXPECT_EQ(3, posted.h.version);
  EXPECT_EQ(4, erased.h.version);
  // Apart from the key, the revision and the times, the two are the same.
  EXPECT_EQ(posted.h.size, erased.h.size);
  EXPECT_EQ(posted.h.label, erased.h.label);
  EXPECT_EQ(std::string(posted.h.owner, posted.h.owner_len),
            std::string(erased.h.owner, erased.h.owner_len));
  EXPECT_EQ(0u, erased.json_len);
  // The board's bytes went back to none, as its items did.
  redisReply* r = Command({"HGET", Base(t, "plan") + ":m", "b"});
  ASSERT_NE(nullptr, r);
  EXPECT_EQ("0", std::string(r->str, r->len));
  freeReplyObject(r);
}

TEST_F(BbEraseTest, AKeyWhoseLeaseRanOutExpiresRatherThanBeingErased) {
  std::string t = Tenant("lease");
  Post(t, "plan", "kept", "alice", "{\"x\":1}");
  Post(t, "plan", "held", "alice", "{\"x\":1}", 1, 1);  // last: any later script expires it
  // The lease (1 ms, by Redis's clock) has surely run out by then.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  Erased dry = Erase(t, "alice", nullptr, true);
  ASSERT_EQ(STATUS_OK, dry.status) << dry.err;
  EXPECT_EQ(1, dry.count);
  Erased e = Erase(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(1, e.count);

  std::vector<std::string> log = Log(t, "plan");
  ASSERT_EQ(2u, log.size());
  std::string kinds;
  for (const auto& ev : log) kinds += ev[0];
  EXPECT_EQ("LD", kinds);  // the PUTs of alice's values left the log
  EXPECT_EQ(std::vector<std::string>{}, Keys(t, "plan"));
}

TEST_F(BbEraseTest, LabelsDoNotLimitErasure) {
  std::string t = Tenant("label");
  Post(t, "plan", "secret", "alice", "{\"subject_id\":\"s1\"}", 4);
  Post(t, "plan", "public", "alice", "{\"subject_id\":\"s1\"}", 1);

  Erased e = Erase(t, nullptr, "s1");
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(2, e.count);
  EXPECT_EQ(std::vector<std::string>{}, Keys(t, "plan"));
}

TEST_F(BbEraseTest, ABoardLeftEmptyStaysAsADeleteOfItsLastKeyLeavesIt) {
  std::string t = Tenant("empty");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  std::string id = last_board_id_;
  ASSERT_EQ(1, last_created_);

  Erased e = Erase(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  ASSERT_EQ(1, e.count);
  EXPECT_EQ(2, Revision(t, "plan"));
  EXPECT_EQ(std::vector<std::string>{}, Keys(t, "plan"));

  // The same board goes on: the next post neither creates it nor resets
  // its revision.
  Post(t, "plan", "b1", "bob", "{\"x\":2}");
  EXPECT_EQ(0, last_created_);
  EXPECT_EQ(id, last_board_id_);
  EXPECT_EQ(3, Revision(t, "plan"));
}

TEST_F(BbEraseTest, ErasingAgainFindsNothing) {
  std::string t = Tenant("again");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  ASSERT_EQ(1, Erase(t, "alice", nullptr).count);
  int64_t rev = Revision(t, "plan");

  Erased e = Erase(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(0, e.count);
  EXPECT_EQ(rev, Revision(t, "plan"));
}

TEST_F(BbEraseTest, OtherTenantsAreUntouchedEvenWhenTheNameIsAGlob) {
  // "x*" as a MATCH pattern unescaped would also match tenant "xy" (the
  // same length), and "x?" would too.
  std::string suffix = Tenant("");
  std::string glob = "x*" + suffix, plain = "xy" + suffix, q = "x?" + suffix;
  Post(glob, "plan", "a1", "alice", "{\"x\":1}");
  Post(plain, "plan", "a1", "alice", "{\"x\":1}");
  Post(q, "plan", "a1", "alice", "{\"x\":1}");
  Post(glob + ":plan", "x", "a1", "alice", "{\"x\":1}");  // a longer tenant

  Erased e = Erase(glob, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(1, e.count);
  EXPECT_EQ(std::vector<std::string>{}, Keys(glob, "plan"));
  EXPECT_EQ(std::vector<std::string>{"a1"}, Keys(plain, "plan"));
  EXPECT_EQ(std::vector<std::string>{"a1"}, Keys(q, "plan"));
  EXPECT_EQ(std::vector<std::string>{"a1"}, Keys(glob + ":plan", "x"));
}

TEST_F(BbEraseTest, FindsEveryBoardPastOneScanStep) {
  std::string t = Tenant("many");
  const int boards = 600;  // more than one SCAN step's COUNT looks at
  for (int i = 0; i < boards; i++)
    ASSERT_EQ(STATUS_OK, Post(t, "task" + std::to_string(i), "k", "alice", "{\"x\":1}"));

  Erased dry = Erase(t, "alice", nullptr, true);
  ASSERT_EQ(STATUS_OK, dry.status) << dry.err;
  EXPECT_EQ(boards, dry.count);
  Erased e = Erase(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(boards, e.count);
  EXPECT_EQ(0, Erase(t, "alice", nullptr, true).count);
}

// ---- export ----

TEST_F(BbEraseTest, ExportByOwnerHandsOverTheOwnersItemsOnEveryBoard) {
  std::string t = Tenant("xowner");
  Post(t, "plan", "a1", "alice", "{\"x\":1}", 2);
  Post(t, "plan", "b1", "bob", "{\"x\":2}");
  Post(t, "notes", "a2", "alice", "\"text\"");
  Post(t, "notes", "a3", "alice", "{\"subject_id\":\"s1\"}");
  Post(t, "review", "b2", "bob", "[1,2]");

  Exported x = Export(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  EXPECT_EQ((std::vector<std::string>{"notes/a2", "notes/a3", "plan/a1"}), x.Ids());
  for (const auto& r : x.records) {
    EXPECT_EQ("blackboard_item", r.kind);
    EXPECT_EQ(t, r.tenant);
    EXPECT_EQ("alice", r.owner);
  }
  const Record* a1 = x.Find("plan/a1");
  ASSERT_NE(nullptr, a1);
  EXPECT_EQ("{\"x\":1}", a1->json);
  EXPECT_EQ(2, a1->label);
  EXPECT_EQ(1, a1->version);  // the board's first revision
  EXPECT_GT(a1->expire_us, 0);
  // A value that is no JSON object still makes one: a record is a Struct.
  const Record* a2 = x.Find("notes/a2");
  ASSERT_NE(nullptr, a2);
  EXPECT_EQ("{\"value\":\"text\"}", a2->json);
  EXPECT_EQ(1, a2->label);
  EXPECT_EQ("{\"subject_id\":\"s1\"}", x.Find("notes/a3")->json);
}

TEST_F(BbEraseTest, ExportBySubjectHandsOverTopLevelStringMatchesOfEveryOwner) {
  std::string t = Tenant("xsubject");
  Post(t, "plan", "a1", "alice", "{\"subject_id\":\"s1\",\"step\":1}");
  Post(t, "plan", "b1", "bob", "{\"subject_id\":\"s1\"}");
  Post(t, "other", "b2", "bob", "{\"note\":\"x\",\"subject_id\":\"s1\"}");
  Post(t, "plan", "a2", "alice", "{\"subject_id\":\"s2\"}");
  Post(t, "plan", "a3", "alice", "{\"inner\":{\"subject_id\":\"s1\"}}");  // not top-level
  Post(t, "plan", "a4", "alice", "\"s1\"");                               // not an object
  Post(t, "plan", "a5", "alice", "{\"subject_id\":1}");                   // not a string
  Post(t, "plan", "a7", "alice", "{\"subject\\u005fid\":\"s1\"}");        // escaped name

  Exported x = Export(t, nullptr, "s1");
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  EXPECT_EQ((std::vector<std::string>{"other/b2", "plan/a1", "plan/a7", "plan/b1"}), x.Ids());
  EXPECT_EQ("bob", x.Find("other/b2")->owner);
  EXPECT_EQ("{\"note\":\"x\",\"subject_id\":\"s1\"}", x.Find("other/b2")->json);
  EXPECT_EQ("alice", x.Find("plan/a1")->owner);

  Exported number = Export(t, nullptr, "1");
  ASSERT_EQ(STATUS_OK, number.status) << number.err;
  EXPECT_TRUE(number.records.empty());
}

TEST_F(BbEraseTest, ExportByOwnerAndSubjectHandsOverOnlyItemsMatchingBoth) {
  std::string t = Tenant("xboth");
  Post(t, "plan", "a1", "alice", "{\"subject_id\":\"s1\"}");
  Post(t, "plan", "a2", "alice", "{\"subject_id\":\"s2\"}");
  Post(t, "plan", "b1", "bob", "{\"subject_id\":\"s1\"}");

  Exported x = Export(t, "alice", "s1");
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  ASSERT_EQ(std::vector<std::string>{"plan/a1"}, x.Ids());
  EXPECT_EQ("alice", x.records[0].owner);
  EXPECT_EQ("{\"subject_id\":\"s1\"}", x.records[0].json);
}

TEST_F(BbEraseTest, ExportKeepsTheReadCeiling) {
  std::string t = Tenant("xlabel");
  Post(t, "plan", "public", "alice", "{\"x\":1}", 1);
  Post(t, "plan", "internal", "alice", "{\"x\":2}", 2);
  Post(t, "plan", "secret", "alice", "{\"x\":4}", 4);

  Exported x = Export(t, "alice", nullptr, 2);
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  EXPECT_EQ((std::vector<std::string>{"plan/internal", "plan/public"}), x.Ids());
  EXPECT_EQ(2, x.Find("plan/internal")->label);
  EXPECT_EQ(1, x.Find("plan/public")->label);

  Exported low = Export(t, "alice", nullptr, 1);
  ASSERT_EQ(STATUS_OK, low.status) << low.err;
  EXPECT_EQ(std::vector<std::string>{"plan/public"}, low.Ids());

  // No bound (0) is erasure's view: every label.
  Exported all = Export(t, "alice", nullptr, 0);
  ASSERT_EQ(STATUS_OK, all.status) << all.err;
  EXPECT_EQ(3u, all.records.size());
}

TEST_F(BbEraseTest, ExportMetaIsTheItemsLastChange) {
  std::string t = Tenant("xmeta");
  Post(t, "plan", "a1", "alice", "{\"v\":1}");
  Post(t, "plan", "b1", "bob", "{\"x\":1}");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  Post(t, "plan", "a1", "alice", "{\"v\":2}", 1, 0, PII_EMAIL);  // revision 3

  Exported x = Export(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  ASSERT_EQ(1u, x.records.size());
  const Record& r = x.records[0];
  EXPECT_EQ("{\"v\":2}", r.json);
  EXPECT_EQ(3, r.version);
  EXPECT_GT(r.create_us, 0);
  EXPECT_GT(r.update_us, r.create_us);
  EXPECT_EQ(std::vector<std::string>{"email"}, r.pii);
}

TEST_F(BbEraseTest, ExportChangesNothingInRedis) {
  std::string t = Tenant("xread");
  Post(t, "plan", "a1", "alice", "{\"subject_id\":\"s1\"}");
  Post(t, "plan", "a2", "alice", "{\"x\":1}");
  // A running lease (one that ran out would be expired meanwhile by the
  // lease sweep of any memoryd on this shared Redis, a change this test
  // would take for the export's).
  Post(t, "plan", "held", "alice", "{\"x\":1}", 1, 60000);
  int64_t rev = Revision(t, "plan");
  std::vector<std::string> log = Log(t, "plan");
  std::vector<std::string> keys = Keys(t, "plan");

  ASSERT_EQ(STATUS_OK, Export(t, "alice", nullptr).status);
  ASSERT_EQ(STATUS_OK, Export(t, nullptr, "s1").status);

  EXPECT_EQ(rev, Revision(t, "plan"));
  EXPECT_EQ(log, Log(t, "plan"));
  EXPECT_EQ(keys, Keys(t, "plan"));
  EXPECT_EQ((std::vector<std::string>{"a1", "a2", "held"}), keys);
}

TEST_F(BbEraseTest, ExportLeavesOutAKeyWhoseLeaseRanOut) {
  std::string t = Tenant("xlease");
  Post(t, "plan", "kept", "alice", "{\"x\":1}");
  Post(t, "plan", "leased", "alice", "{\"x\":2}", 1, 60000);  // a lease still running
  Post(t, "plan", "held", "alice", "{\"x\":3}", 1, 1);        // last: nothing expires it
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  Exported x = Export(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  EXPECT_EQ((std::vector<std::string>{"plan/kept", "plan/leased"}), x.Ids());
}

TEST_F(BbEraseTest, AnEmitErrorEndsTheExportWithItsCode) {
  std::string t = Tenant("xstop");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  Post(t, "plan", "a2", "alice", "{\"x\":2}");
  Post(t, "notes", "a3", "alice", "{\"x\":3}");
  Post(t, "review", "a4", "alice", "{\"x\":4}");

  Exported stop;
  stop.fail_at = 1;
  stop.fail_code = STATUS_ECANCELLED;
  Exported x = Export(t, "alice", nullptr, 0, stop);
  EXPECT_EQ(STATUS_ECANCELLED, x.status) << x.err;
  EXPECT_EQ(2, x.calls);  // nothing after the refusal
  EXPECT_EQ(1u, x.records.size());

  Exported first;
  first.fail_at = 0;
  first.fail_code = STATUS_ENOMEM;
  x = Export(t, "alice", nullptr, 0, first);
  EXPECT_EQ(STATUS_ENOMEM, x.status);
  EXPECT_EQ(1, x.calls);
}

TEST_F(BbEraseTest, ExportNeverHandsOverAnotherTenantsItems) {
  // The glob tenants of the erasure test: "x*" unescaped would match "xy".
  std::string suffix = Tenant("");
  std::string glob = "x*" + suffix, plain = "xy" + suffix, q = "x?" + suffix;
  Post(glob, "plan", "a1", "alice", "{\"t\":\"glob\"}");
  Post(plain, "plan", "a1", "alice", "{\"t\":\"plain\"}");
  Post(q, "plan", "a1", "alice", "{\"t\":\"q\"}");
  Post(glob + ":plan", "x", "a1", "alice", "{\"t\":\"longer\"}");  // a longer tenant

  Exported x = Export(glob, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  ASSERT_EQ(std::vector<std::string>{"plan/a1"}, x.Ids());
  EXPECT_EQ("{\"t\":\"glob\"}", x.records[0].json);
  EXPECT_EQ(glob, x.records[0].tenant);

  Exported none = Export(Tenant("nobody"), "alice", nullptr);
  ASSERT_EQ(STATUS_OK, none.status) << none.err;
  EXPECT_TRUE(none.records.empty());
}

TEST_F(BbEraseTest, ExportIdNamesTheTaskAsTheApiDoes) {
  std::string t = Tenant("xtask");
  Post(t, "a:b}c/d", "k/1", "alice", "{\"x\":1}");  // separators in task and key

  Exported x = Export(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  EXPECT_EQ(std::vector<std::string>{"a:b}c/d/k/1"}, x.Ids());
}

TEST_F(BbEraseTest, ARetentionSelectionExportsNothing) {
  std::string t = Tenant("xretention");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  tier_erase_sel sel = {};
  sel.tenant = t.c_str();
  sel.owner = "alice";
  sel.before_us = (NowMs() + 60000) * 1000;
  Exported x = ExportSel(sel);
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  EXPECT_TRUE(x.records.empty());
}

// A private Redis the tests below stop or freeze.
class BbEraseFaultTest : public BbEraseTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.ok()) << redis_.error();
    Open(redis_.url());
  }
  void TearDown() override {
    redis_.Thaw();
    Close();
  }
  RedisServer redis_;
};

TEST_F(BbEraseFaultTest, RedisDownIsUnavailableAtOnce) {
  std::string t = Tenant("down");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  ASSERT_TRUE(redis_.Stop());
  int64_t start = NowMs();
  Erased e = Erase(t, "alice", nullptr, false, NowMs() + 5000);
  EXPECT_EQ(STATUS_EUNAVAILABLE, e.status) << e.err;
  EXPECT_NE(std::string::npos, e.err.find("blackboard erase")) << e.err;
  EXPECT_LT(NowMs() - start, 4000);
}

TEST_F(BbEraseFaultTest, HungRedisTimesOutAtTheDeadline) {
  std::string t = Tenant("hung");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  // A connection opened while Redis answers, then Redis hangs.
  ASSERT_EQ(1, Erase(t, "alice", nullptr, true).count);
  ASSERT_TRUE(redis_.Freeze());
  int64_t start = NowMs();
  Erased e = Erase(t, "alice", nullptr, false, NowMs() + 500);
  EXPECT_EQ(STATUS_ETIMEOUT, e.status) << e.err;
  EXPECT_GE(NowMs() - start, 400);
  EXPECT_LT(NowMs() - start, 5000);
  ASSERT_TRUE(redis_.Thaw());
  // Nothing was erased, so the next erasure does it (once the pool has
  // replaced the connection it gave up on).
  Erased again = {};
  for (int64_t until = NowMs() + 10000; NowMs() < until;) {
    again = Erase(t, "alice", nullptr);
    if (again.status == STATUS_OK) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(STATUS_OK, again.status) << again.err;
  EXPECT_EQ(1, again.count);
}

TEST_F(BbEraseFaultTest, ScriptUnknownToRedisIsSentWhole) {
  std::string t = Tenant("noscript");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  redisReply* r = Command({"SCRIPT", "FLUSH"});
  ASSERT_NE(nullptr, r);
  freeReplyObject(r);

  Erased e = Erase(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, e.status) << e.err;
  EXPECT_EQ(1, e.count);
}

TEST_F(BbEraseFaultTest, ExportWithRedisDownIsUnavailableAtOnce) {
  std::string t = Tenant("xdown");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  ASSERT_TRUE(redis_.Stop());
  int64_t start = NowMs();
  Exported x = Export(t, "alice", nullptr, 0, Exported(), NowMs() + 5000);
  EXPECT_EQ(STATUS_EUNAVAILABLE, x.status) << x.err;
  EXPECT_NE(std::string::npos, x.err.find("blackboard export")) << x.err;
  EXPECT_TRUE(x.records.empty());
  EXPECT_LT(NowMs() - start, 4000);
}

TEST_F(BbEraseFaultTest, ExportFromAHungRedisTimesOutAtTheDeadline) {
  std::string t = Tenant("xhung");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  // A connection opened while Redis answers, then Redis hangs.
  ASSERT_EQ(1u, Export(t, "alice", nullptr).records.size());
  ASSERT_TRUE(redis_.Freeze());
  int64_t start = NowMs();
  Exported x = Export(t, "alice", nullptr, 0, Exported(), NowMs() + 500);
  EXPECT_EQ(STATUS_ETIMEOUT, x.status) << x.err;
  EXPECT_GE(NowMs() - start, 400);
  EXPECT_LT(NowMs() - start, 5000);
}

TEST_F(BbEraseFaultTest, ExportScriptUnknownToRedisIsSentWhole) {
  std::string t = Tenant("xnoscript");
  Post(t, "plan", "a1", "alice", "{\"x\":1}");
  redisReply* r = Command({"SCRIPT", "FLUSH"});
  ASSERT_NE(nullptr, r);
  freeReplyObject(r);

  Exported x = Export(t, "alice", nullptr);
  ASSERT_EQ(STATUS_OK, x.status) << x.err;
  EXPECT_EQ(std::vector<std::string>{"plan/a1"}, x.Ids());
}

}  // namespace
