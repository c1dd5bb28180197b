// redis_url: redis://[[user]:password@]host[:port][/db], strictly; every
// rejection names what could not be read.
#include <gtest/gtest.h>
#include <string.h>

#include <string>

extern "C" {
#include "service/store/redis_url.h"
}

namespace {

class RedisUrlTest : public ::testing::Test {
 protected:
  int Parse(const std::string& url) {
    err_[0] = '\0';
    return redis_url_parse(url.c_str(), &u_, err_, sizeof err_);
  }
  std::string Err() const { return err_; }
  redis_url u_{};
  char err_[512] = "";
};

TEST_F(RedisUrlTest, HostOnlyGetsDefaultPortAndDatabase) {
  ASSERT_EQ(0, Parse("redis://cache.internal")) << Err();
  EXPECT_STREQ("cache.internal", u_.host);
  EXPECT_EQ(6379, u_.port);
  EXPECT_STREQ("", u_.password);
  EXPECT_EQ(0, u_.db);
}

TEST_F(RedisUrlTest, HostAndPort) {
  ASSERT_EQ(0, Parse("redis://127.0.0.1:6380")) << Err();
  EXPECT_STREQ("127.0.0.1", u_.host);
  EXPECT_EQ(6380, u_.port);
  EXPECT_STREQ("", u_.password);
  EXPECT_EQ(0, u_.db);
}

TEST_F(RedisUrlTest, PasswordHostPortAndDatabase) {
  ASSERT_EQ(0, Parse("redis://:s3cret@10.0.0.5:7000/3")) << Err();
  EXPECT_STREQ("10.0.0.5", u_.host);
  EXPECT_EQ(7000, u_.port);
  EXPECT_STREQ("s3cret", u_.password);
  EXPECT_EQ(3, u_.db);
}

TEST_F(RedisUrlTest, UserIsSkippedAndPasswordKept) {
  ASSERT_EQ(0, Parse("redis://user:pw@h/0")) << Err();
  EXPECT_STREQ("h", u_.host);
  EXPECT_EQ(6379, u_.port);
  EXPECT_STREQ("pw", u_.password);
  EXPECT_EQ(0, u_.db);
}

TEST_F(RedisUrlTest, BareUserCarriesNoPassword) {
  ASSERT_EQ(0, Parse("redis://agent@h:7")) << Err();
  EXPECT_STREQ("h", u_.host);
  EXPECT_EQ(7, u_.port);
  EXPECT_STREQ("", u_.password);
}

TEST_F(RedisUrlTest, PasswordMayContainColons) {
  ASSERT_EQ(0, Parse("redis://user:a:b:c@h:1")) << Err();
  EXPECT_STREQ("a:b:c", u_.password);
  EXPECT_STREQ("h", u_.host);
  EXPECT_EQ(1, u_.port);
}

TEST_F(RedisUrlTest, PortBoundsAreInclusive) {
  ASSERT_EQ(0, Parse("redis://h:1")) << Err();
  EXPECT_EQ(1, u_.port);
  ASSERT_EQ(0, Parse("redis://h:65535")) << Err();
  EXPECT_EQ(65535, u_.port);
}

TEST_F(RedisUrlTest, TrailingSlashMeansDatabaseZero) {
  ASSERT_EQ(0, Parse("redis://h:6379/")) << Err();
  EXPECT_STREQ("h", u_.host);
  EXPECT_EQ(0, u_.db);
}

TEST_F(RedisUrlTest, LargeDatabaseNumber) {
  ASSERT_EQ(0, Parse("redis://h/15")) << Err();
  EXPECT_EQ(15, u_.db);
}

TEST_F(RedisUrlTest, OtherSchemeIsRejected) {
  EXPECT_EQ(-1, Parse("http://x"));
  EXPECT_NE(std::string::npos, Err().find("redis://")) << Err();
  EXPECT_EQ(-1, Parse("rediss://x"));
  EXPECT_EQ(-1, Parse("REDIS://x"));
  EXPECT_EQ(-1, Parse(""));
  EXPECT_EQ(-1, Parse("x:6379"));
}

TEST_F(RedisUrlTest, MissingHostIsRejected) {
  EXPECT_EQ(-1, Parse("redis://"));
  EXPECT_NE(std::string::npos, Err().find("host")) << Err();
  EXPECT_EQ(-1, Parse("redis://:6379"));
  EXPECT_NE(std::string::npos, Err().find("host")) << Err();
  EXPECT_EQ(-1, Parse("redis:///0"));
  EXPECT_EQ(-1, Parse("redis://:pw@"));
  EXPECT_EQ(-1, Parse("redis://:pw@:6379/1"));
}

TEST_F(RedisUrlTest, PortZeroIsRejected) {
  EXPECT_EQ(-1, Parse("redis://h:0"));
  EXPECT_NE(std::string::npos, Err().find("port")) << Err();
}

TEST_F(RedisUrlTest, PortAboveRangeIsRejected) {
  EXPECT_EQ(-1, Parse("redis://h:70000"));
  EXPECT_NE(std::string::npos, Err().find("port")) << Err();
  EXPECT_EQ(-1, Parse("redis://h:65536"));
  EXPECT_EQ(-1, Parse("redis://h:99999999999999999999"));
}

TEST_F(RedisUrlTest, NonNumericPortIsRejected) {
  EXPECT_EQ(-1, Parse("redis://h:12ab"));
  EXPECT_NE(std::string::npos, Err().find("port")) << Err();
  EXPECT_EQ(-1, Parse("redis://h:"));
  EXPECT_EQ(-1, Parse("redis://h:-1"));
  EXPECT_EQ(-1, Parse("redis://h:+80"));
  EXPECT_EQ(-1, Parse("redis://h: 80"));
  EXPECT_EQ(-1, Parse("redis://h:6379:1"));
}

TEST_F(RedisUrlTest, NonNumericDatabaseIsRejected) {
  EXPECT_EQ(-1, Parse("redis://h/abc"));
  EXPECT_NE(std::string::npos, Err().find("database")) << Err();
  EXPECT_EQ(-1, Parse("redis://h/1x"));
  EXPECT_EQ(-1, Parse("redis://h/-1"));
  EXPECT_EQ(-1, Parse("redis://h/0/1"));
  EXPECT_EQ(-1, Parse("redis://h:6379/0@evil"));
}

TEST_F(RedisUrlTest, HostOf255BytesFitsAnd256IsRejected) {
  std::string h255(255, 'h');
  ASSERT_EQ(0, Parse("redis://" + h255 + ":6379")) << Err();
  EXPECT_EQ(h255, std::string(u_.host));
  std::string h256(256, 'h');
  EXPECT_EQ(-1, Parse("redis://" + h256));
  EXPECT_NE(std::string::npos, Err().find("host")) << Err().substr(0, 80);
  EXPECT_EQ(-1, Parse("redis://" + std::string(5000, 'h') + ":6379/0"));
}

TEST_F(RedisUrlTest, OverlongPasswordIsRejected) {
  std::string pw255(255, 'p');
  ASSERT_EQ(0, Parse("redis://:" + pw255 + "@h")) << Err();
  EXPECT_EQ(pw255, std::string(u_.password));
  EXPECT_EQ(-1, Parse("redis://:" + std::string(256, 'p') + "@h"));
  EXPECT_NE(std::string::npos, Err().find("password")) << Err();
}

TEST_F(RedisUrlTest, ErrorMessageIsTruncatedToTheBuffer) {
  char small[16];
  memset(small, 'X', sizeof small);
  redis_url u;
  EXPECT_EQ(-1, redis_url_parse("http://a-very-long-host-name-indeed", &u, small, sizeof small));
  EXPECT_EQ('\0', small[sizeof small - 1]);
  EXPECT_EQ(sizeof small - 1, strlen(small));
}

}  // namespace
