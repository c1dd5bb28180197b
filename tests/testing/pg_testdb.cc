// pg_testdb: CREATE/DROP DATABASE through libpq; the new database's
// connection string is the admin one with dbname replaced.
#include "tests/testing/pg_testdb.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <random>

namespace {

bool Exec(const std::string& url, const std::string& sql, std::string* err) {
  PGconn* c = PQconnectdb(url.c_str());
  bool ok = PQstatus(c) == CONNECTION_OK;
  if (ok) {
    PGresult* r = PQexec(c, sql.c_str());
    ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) *err = PQresultErrorMessage(r);
    PQclear(r);
  } else {
    *err = PQerrorMessage(c);
  }
  PQfinish(c);
  return ok;
}

// Rebuilds url as key='value' pairs with dbname swapped.
std::string WithDbName(const std::string& url, const std::string& db) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (!opts) {
    PQfreemem(err);
    return "";
  }
  std::string out;
  for (PQconninfoOption* o = opts; o->keyword; o++) {
    if (!o->val || std::string(o->keyword) == "dbname") continue;
    std::string v;
    for (const char* p = o->val; *p; p++) {
      if (*p == '\'' || *p == '\\') v += '\\';
      v += *p;
    }
    out += std::string(o->keyword) + "='" + v + "' ";
  }
  PQconninfoFree(opts);
  return out + "dbname='" + db + "'";
}

}  // namespace

PgTestDb::PgTestDb() {
  const char* admin = getenv("MEMORYD_TEST_PG_URL");
  if (!admin || !*admin) {
    error_ = "MEMORYD_TEST_PG_URL is not set: run the tests with `make test`";
    return;
  }
  admin_url_ = admin;
  std::random_device rd;
  name_ = "memoryd_test_" + std::to_string(getpid()) + "_" + std::to_string(rd() % 1000000);
  if (!Exec(admin_url_, "CREATE DATABASE " + name_, &error_)) return;
  url_ = WithDbName(admin_url_, name_);
  if (url_.empty()) error_ = "cannot parse MEMORYD_TEST_PG_URL";
}

PgTestDb::~PgTestDb() {
  if (name_.empty() || admin_url_.empty()) return;
  std::string err;
  Exec(admin_url_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)", &err);
}

std::string TestRedisUrl() {
  const char* r = getenv("MEMORYD_TEST_REDIS_URL");
  return r ? r : "";
}

PgSession::PgSession(const std::string& url) : conn_(PQconnectdb(url.c_str())) {}
PgSession::~PgSession() { PQfinish(conn_); }
bool PgSession::ok() const { return PQstatus(conn_) == CONNECTION_OK; }
std::string PgSession::error() const { return PQerrorMessage(conn_); }

std::string PgSession::Value(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  std::string v =
      PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  return v;
}

int PgSession::LockWaiters() {
  // Inside a transaction (the one holding the lock, typically)
  // pg_stat_activity is read once and kept until it ends: without
  // discarding that snapshot every poll would see the first one's sessions
  // (a call that began waiting later never shows).
  Value("SELECT pg_stat_clear_snapshot()");
  std::string n = Value(
      "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
      " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
      " AND backend_type = 'client backend'");
  return n.empty() ? -1 : std::stoi(n);  // -1: the query failed
}
