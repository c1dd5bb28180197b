// log: every line is one JSON object with time/level/msg and the fields;
// hostile values cannot break or forge lines; levels filter; overlong lines
// are truncated but stay one line.
#include <ctype.h>
#include <gtest/gtest.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "service/core/crash.h"
#include "service/core/log.h"
}

namespace {

// "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" (std::regex trips -Werror under ASan builds).
bool IsRfc3339Micros(const std::string& t) {
  const std::string shape = "dddd-dd-ddTdd:dd:dd.ddddddZ";
  if (t.size() != shape.size()) return false;
  for (size_t i = 0; i < t.size(); i++) {
    if (shape[i] == 'd' ? !isdigit(static_cast<unsigned char>(t[i])) : t[i] != shape[i])
      return false;
  }
  return true;
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_level_ = log_get_level();
    log_set_level(LOG_INFO);
    f_ = tmpfile();
    ASSERT_NE(nullptr, f_);
    log_set_fd(fileno(f_));
  }
  void TearDown() override {
    log_set_fd(2);
    log_set_level(saved_level_);
    if (f_) fclose(f_);
  }

  // Everything written so far.
  std::string Output() {
    std::string s;
    char buf[8192];
    off_t off = 0;
    ssize_t n;
    while ((n = pread(fileno(f_), buf, sizeof buf, off)) > 0) {
      s.append(buf, static_cast<size_t>(n));
      off += n;
    }
    return s;
  }

  std::vector<std::string> Lines() {
    std::vector<std::string> lines;
    std::string all = Output();
    size_t start = 0;
    for (size_t i = 0; i < all.size(); i++) {
      if (all[i] == '\n') {
        lines.push_back(all.substr(start, i - start));
        start = i + 1;
      }
    }
    if (start != all.size()) lines.push_back(all.substr(start));  // unterminated tail
    return lines;
  }

  // Parses one line as a JSON object (caller json_decref's); fails the test
  // with jansson's reason when it is not.
  static json_t* Parse(const std::string& line) {
    json_error_t e;
    json_t* j = json_loadb(line.data(), line.size(), 0, &e);
    EXPECT_NE(nullptr, j) << e.text << " at " << e.position << " in: " << line.substr(0, 120)
                          << "..." << line.substr(line.size() > 120 ? line.size() - 120 : 0);
    if (j) {
      EXPECT_TRUE(json_is_object(j)) << line;
    }
    return j;
  }

  static std::string Str(json_t* obj, const char* key) {
    json_t* v = json_object_get(obj, key);
    EXPECT_TRUE(v && json_is_string(v)) << key;
    if (!v || !json_is_string(v)) return "<missing>";
    return std::string(json_string_value(v), json_string_length(v));
  }

  log_level saved_level_ = LOG_INFO;
  FILE* f_ = nullptr;
};

TEST_F(LogTest, LineIsOneJsonObjectWithTimeLevelMsgAndFields) {
  log_fields(LOG_INFO, "listening", LOG_F_STR, "addr", "127.0.0.1:50051", LOG_F_INT, "workers",
             static_cast<int64_t>(1) << 40, LOG_F_DBL, "ratio", 0.25, LOG_F_STR, "nothing",
             static_cast<const char*>(nullptr), LOG_F_INT, "neg", static_cast<int64_t>(-7),
             LOG_F_END);
  std::string out = Output();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ('\n', out.back());
  EXPECT_EQ(1, std::count(out.begin(), out.end(), '\n')) << out;
  json_t* j = Parse(out.substr(0, out.size() - 1));
  ASSERT_NE(nullptr, j);
  EXPECT_TRUE(IsRfc3339Micros(Str(j, "time"))) << Str(j, "time");
  EXPECT_EQ("info", Str(j, "level"));
  EXPECT_EQ("listening", Str(j, "msg"));
  EXPECT_EQ("127.0.0.1:50051", Str(j, "addr"));
  json_t* w = json_object_get(j, "workers");
  ASSERT_TRUE(w && json_is_integer(w));
  EXPECT_EQ(static_cast<json_int_t>(1) << 40, json_integer_value(w));
  json_t* r = json_object_get(j, "ratio");
  ASSERT_TRUE(r && json_is_number(r));
  EXPECT_DOUBLE_EQ(0.25, json_number_value(r));
  json_t* n = json_object_get(j, "nothing");
  ASSERT_NE(nullptr, n);
  EXPECT_TRUE(json_is_null(n));
  json_t* neg = json_object_get(j, "neg");
  ASSERT_TRUE(neg && json_is_integer(neg));
  EXPECT_EQ(-7, json_integer_value(neg));
  json_decref(j);
}

TEST_F(LogTest, EachLevelIsNamedInTheLine) {
  log_set_level(LOG_DEBUG);
  log_fields(LOG_DEBUG, "d", LOG_F_END);
  log_fields(LOG_INFO, "i", LOG_F_END);
  log_fields(LOG_WARN, "w", LOG_F_END);
  log_fields(LOG_ERROR, "e", LOG_F_END);
  auto lines = Lines();
  ASSERT_EQ(4u, lines.size());
  const char* want[] = {"debug", "info", "warn", "error"};
  for (size_t i = 0; i < 4; i++) {
    json_t* j = Parse(lines[i]);
    ASSERT_NE(nullptr, j);
    EXPECT_EQ(want[i], Str(j, "level"));
    json_decref(j);
  }
}

TEST_F(LogTest, ControlCharactersAndQuotesInValuesAreEscaped) {
  const std::string hostile = "a\n\"}b\\c\td\r\x01\x1f\x7f{\"level\":\"error\"}";
  log_fields(LOG_WARN, hostile.c_str(), LOG_F_STR, "peer", hostile.c_str(), LOG_F_STR, "k\"ey\n",
             "v", LOG_F_END);
  std::string out = Output();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(1, std::count(out.begin(), out.end(), '\n')) << out;
  EXPECT_EQ('\n', out.back());
  EXPECT_EQ(std::string::npos, out.find('\r')) << out;
  EXPECT_EQ(std::string::npos, out.find('\x01')) << out;
  EXPECT_EQ(std::string::npos, out.find('\x7f')) << out;
  json_t* j = Parse(out.substr(0, out.size() - 1));
  ASSERT_NE(nullptr, j);
  EXPECT_EQ("warn", Str(j, "level"));
  EXPECT_EQ(hostile, Str(j, "msg"));
  EXPECT_EQ(hostile, Str(j, "peer"));
  EXPECT_EQ("v", Str(j, "k\"ey\n"));
  json_decref(j);
}

TEST_F(LogTest, LogMsgFormatsPrintfStyleAndEscapes) {
  log_msg(LOG_ERROR, "%d items from %s", 3, "x\n\"y\"");
  auto lines = Lines();
  ASSERT_EQ(1u, lines.size());
  json_t* j = Parse(lines[0]);
  ASSERT_NE(nullptr, j);
  EXPECT_EQ("error", Str(j, "level"));
  EXPECT_EQ("3 items from x\n\"y\"", Str(j, "msg"));
  json_decref(j);
}

TEST_F(LogTest, DebugIsSuppressedAtInfo) {
  log_set_level(LOG_INFO);
  EXPECT_FALSE(log_enabled(LOG_DEBUG));
  EXPECT_TRUE(log_enabled(LOG_INFO));
  log_fields(LOG_DEBUG, "hidden", LOG_F_STR, "k", "v", LOG_F_END);
  log_msg(LOG_DEBUG, "hidden %d", 1);
  EXPECT_EQ("", Output());
  log_fields(LOG_INFO, "shown", LOG_F_END);
  auto lines = Lines();
  ASSERT_EQ(1u, lines.size());
  EXPECT_NE(std::string::npos, lines[0].find("\"shown\""));
}

TEST_F(LogTest, WarnLevelSuppressesInfoButNotError) {
  log_set_level(LOG_WARN);
  EXPECT_EQ(LOG_WARN, log_get_level());
  log_msg(LOG_INFO, "hidden");
  log_msg(LOG_WARN, "w");
  log_msg(LOG_ERROR, "e");
  auto lines = Lines();
  ASSERT_EQ(2u, lines.size());
  EXPECT_NE(std::string::npos, lines[0].find("\"msg\":\"w\""));
  EXPECT_NE(std::string::npos, lines[1].find("\"msg\":\"e\""));
}

TEST_F(LogTest, DebugIsWrittenAtDebugLevel) {
  log_set_level(LOG_DEBUG);
  EXPECT_TRUE(log_enabled(LOG_DEBUG));
  log_msg(LOG_DEBUG, "visible");
  auto lines = Lines();
  ASSERT_EQ(1u, lines.size());
  EXPECT_NE(std::string::npos, lines[0].find("\"level\":\"debug\""));
}

TEST_F(LogTest, LevelParseAcceptsTheFourNames) {
  struct {
    const char* name;
    log_level want;
  } cases[] = {{"debug", LOG_DEBUG}, {"info", LOG_INFO}, {"warn", LOG_WARN}, {"error", LOG_ERROR}};
  for (const auto& c : cases) {
    log_level got = c.want == LOG_DEBUG ? LOG_ERROR : LOG_DEBUG;
    ASSERT_EQ(0, log_level_parse(c.name, &got)) << c.name;
    EXPECT_EQ(c.want, got) << c.name;
    EXPECT_STREQ(c.name, log_level_name(c.want));
  }
}

TEST_F(LogTest, LevelParseRejectsOtherNames) {
  for (const char* bad :
       {"", "INFO", "Debug", "warning", "err", "trace", "fatal", "info ", " info", "infox"}) {
    log_level got = LOG_WARN;
    EXPECT_EQ(-1, log_level_parse(bad, &got)) << "'" << bad << "'";
    EXPECT_EQ(LOG_WARN, got) << "output changed for '" << bad << "'";
  }
}

TEST_F(LogTest, VeryLongPrintfMessageIsTruncatedToOneValidLine) {
  std::string big(20000, 'm');
  log_msg(LOG_INFO, "%s", big.c_str());
  std::string out = Output();
  ASSERT_GE(out.size(), 2u);
  EXPECT_LE(out.size(), 4096u);
  EXPECT_EQ(1, std::count(out.begin(), out.end(), '\n'));
  EXPECT_EQ("}\n", out.substr(out.size() - 2));
  json_t* j = Parse(out.substr(0, out.size() - 1));
  ASSERT_NE(nullptr, j);
  std::string msg = Str(j, "msg");
  EXPECT_GT(msg.size(), 1000u);
  EXPECT_EQ(std::string::npos, msg.find_first_not_of('m'));
  json_decref(j);
}

TEST_F(LogTest, VeryLongFieldValueIsTruncatedToOneValidLine) {
  std::string big(20000, 'v');
  log_fields(LOG_INFO, "big field", LOG_F_STR, "payload", big.c_str(), LOG_F_INT, "after",
             static_cast<int64_t>(1), LOG_F_END);
  std::string out = Output();
  ASSERT_GE(out.size(), 2u);
  EXPECT_LE(out.size(), 4096u);
  EXPECT_EQ(1, std::count(out.begin(), out.end(), '\n'));
  EXPECT_EQ("}\n", out.substr(out.size() - 2)) << "line ends with: " << out.substr(out.size() - 20);
  json_t* j = Parse(out.substr(0, out.size() - 1));
  if (j) {
    EXPECT_EQ("big field", Str(j, "msg"));
    json_decref(j);
  }
}

TEST_F(LogTest, VeryLongMessageOfEscapedCharactersIsTruncatedToOneValidLine) {
  // Each byte becomes a six-character \u00XX escape, so the cut falls
  // mid-escape unless the writer guards against it.
  std::string ctl(1500, '\x01');
  log_msg(LOG_WARN, "%s", ctl.c_str());
  std::string out = Output();
  ASSERT_GE(out.size(), 2u);
  EXPECT_LE(out.size(), 4096u);
  EXPECT_EQ(1, std::count(out.begin(), out.end(), '\n'));
  EXPECT_EQ("}\n", out.substr(out.size() - 2)) << "line ends with: " << out.substr(out.size() - 20);
  json_t* j = Parse(out.substr(0, out.size() - 1));
  if (j) json_decref(j);
}

TEST_F(LogTest, TruncationNeverSplitsAMultiByteCharacter) {
  // Three-byte characters at every alignment: whichever byte the cut lands
  // on, the line must stay valid UTF-8 (jansson rejects invalid UTF-8).
  for (int pad = 0; pad < 3; pad++) {
    ASSERT_EQ(0, ftruncate(fileno(f_), 0));
    rewind(f_);
    std::string s(static_cast<size_t>(pad), 'p');
    for (int i = 0; i < 3000; i++) s += "\xe2\x82\xac";  // U+20AC
    log_fields(LOG_INFO, "euro", LOG_F_STR, "v", s.c_str(), LOG_F_END);
    std::string out = Output();
    ASSERT_EQ("}\n", out.substr(out.size() - 2)) << pad;
    json_t* j = Parse(out.substr(0, out.size() - 1));
    ASSERT_NE(nullptr, j) << pad;
    EXPECT_TRUE(json_is_true(json_object_get(j, "truncated"))) << pad;
    json_decref(j);
  }
}

TEST_F(LogTest, FieldsAfterACutAreDroppedNotHalfWritten) {
  std::string big(5000, 'k');
  log_fields(LOG_INFO, "m", LOG_F_INT, "first", static_cast<int64_t>(7), LOG_F_STR, big.c_str(),
             "v", LOG_F_INT, "after", static_cast<int64_t>(9), LOG_F_END);
  std::string out = Output();
  json_t* j = Parse(out.substr(0, out.size() - 1));
  ASSERT_NE(nullptr, j);
  EXPECT_EQ(7, json_integer_value(json_object_get(j, "first")));
  EXPECT_EQ(nullptr, json_object_get(j, "after"));
  EXPECT_TRUE(json_is_true(json_object_get(j, "truncated")));
  json_decref(j);
}

// The cut landing on the field of an unknown kind (a list log.c stops
// reading) dropped only its value and left `"key":,` behind: every length
// of control-character value before it must still give one JSON object.
TEST_F(LogTest, ACutAtAnUnknownKindFieldStillGivesJson) {
  for (size_t n = 400; n <= 700; n += 7) {
    ASSERT_EQ(0, ftruncate(fileno(f_), 0));
    rewind(f_);
    std::string msg(970, 'm'), ctl(n, '\x01');
    log_fields(LOG_INFO, msg.c_str(), LOG_F_STR, "", ctl.c_str(), 99, "", LOG_F_END);
    std::string out = Output();
    json_t* j = Parse(out.substr(0, out.size() - 1));
    ASSERT_NE(nullptr, j) << n << ": " << out.substr(out.size() > 60 ? out.size() - 60 : 0);
    json_decref(j);
  }
}

// A string that ends exactly where the line is full had its opening quote
// written and its closing quote refused, leaving `"key":"` open (the
// fuzzer's find): every key length around the cap, with an empty value
// after it, must give one JSON object.
TEST_F(LogTest, AStringEndingExactlyAtTheCapIsStillClosed) {
  // Escapes are 6 bytes: a message of every length mod 6 shifts where the
  // key ends, so one of them ends it exactly at the cap.
  for (size_t pad = 0; pad < 6; pad++) {
    for (size_t n = 640; n <= 680; n++) {
      ASSERT_EQ(0, ftruncate(fileno(f_), 0));
      rewind(f_);
      std::string msg(pad + 1, 'm'), key(n, '\x7f');
      log_fields(LOG_ERROR, msg.c_str(), LOG_F_STR, key.c_str(), "", LOG_F_END);
      std::string out = Output();
      json_t* j = Parse(out.substr(0, out.size() - 1));
      ASSERT_NE(nullptr, j) << pad << "/" << n << ": "
                            << out.substr(out.size() > 60 ? out.size() - 60 : 0);
      json_decref(j);
    }
  }
}

TEST_F(LogTest, ConcurrentLinesNeverInterleave) {
  const int kThreads = 8, kLines = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([t] {
      std::string pad(100 + t * 50, static_cast<char>('a' + t));
      for (int i = 0; i < kLines; i++)
        log_fields(LOG_INFO, "concurrent", LOG_F_INT, "thread", static_cast<int64_t>(t), LOG_F_INT,
                   "i", static_cast<int64_t>(i), LOG_F_STR, "pad", pad.c_str(), LOG_F_END);
    });
  }
  for (auto& th : threads) th.join();
  auto lines = Lines();
  ASSERT_EQ(static_cast<size_t>(kThreads * kLines), lines.size());
  std::vector<int> per_thread(kThreads, 0);
  for (const auto& line : lines) {
    json_t* j = Parse(line);
    ASSERT_NE(nullptr, j);
    json_t* t = json_object_get(j, "thread");
    ASSERT_TRUE(t && json_is_integer(t));
    int ti = static_cast<int>(json_integer_value(t));
    ASSERT_TRUE(ti >= 0 && ti < kThreads);
    EXPECT_EQ(std::string(100 + ti * 50, static_cast<char>('a' + ti)), Str(j, "pad"));
    per_thread[ti]++;
    json_decref(j);
  }
  for (int t = 0; t < kThreads; t++) EXPECT_EQ(kLines, per_thread[t]) << t;
}

// A process that dies of SIGSEGV says so on the log (signal, address, the
// time as every line has it, then the stack) and still dies of SIGSEGV.
// Under ASan the reporter stands aside for ASan's own report.
TEST_F(LogTest, AFatalSignalIsReportedOnTheLogAndStillKills) {
  int fds[2];
  ASSERT_EQ(0, pipe(fds));
  // a page no one may touch: a real fault at a known address
  void* guard = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(MAP_FAILED, guard);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);  // where ASan reports
    log_set_fd(fds[1]);
    if (crash_install() != 0) _exit(3);
    *static_cast<volatile int*>(guard) = 1;
    _exit(4);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  munmap(guard, 4096);
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_NE(std::string::npos, out.find("AddressSanitizer: SEGV")) << out;
#else
  ASSERT_TRUE(WIFSIGNALED(status)) << "exited " << WEXITSTATUS(status) << ": " << out;
  EXPECT_EQ(SIGSEGV, WTERMSIG(status));
  size_t eol = out.find('\n');
  ASSERT_NE(std::string::npos, eol) << out;
  json_t* j = json_loads(out.substr(0, eol).c_str(), 0, nullptr);
  ASSERT_NE(nullptr, j) << out;
  EXPECT_EQ("fatal", Str(j, "level"));
  EXPECT_EQ("memoryd crashed", Str(j, "msg"));
  EXPECT_EQ("SIGSEGV", Str(j, "signal"));
  char where[32];
  snprintf(where, sizeof where, "%p", guard);
  EXPECT_EQ(where, Str(j, "address"));
  std::string t = Str(j, "time");
  EXPECT_TRUE(IsRfc3339Micros(t)) << t;
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char day[16];
  strftime(day, sizeof day, "%Y-%m-%d", &tm);
  EXPECT_EQ(0u, t.find(day)) << t << " is not today, " << day;
  json_decref(j);
  // the stack follows: several frames, one per line
  EXPECT_GE(std::count(out.begin() + static_cast<long>(eol) + 1, out.end(), '\n'), 3) << out;
#endif
}

}  // namespace
