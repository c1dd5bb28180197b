// pg_server: see pg_server.h.
#include "tests/testing/pg_server.h"

#include <dirent.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tests/testing/ports.h"

namespace {

std::string FindBinDir() {
  if (const char* env = std::getenv("MEMORYD_DEV_PG_BIN")) return env;
  std::string best;
  int best_ver = -1;
  if (DIR* d = opendir("/usr/lib/postgresql")) {
    while (struct dirent* e = readdir(d)) {
      int ver = std::atoi(e->d_name);
      std::string bin = std::string("/usr/lib/postgresql/") + e->d_name + "/bin";
      if (ver > best_ver && access((bin + "/postgres").c_str(), X_OK) == 0 &&
          access((bin + "/initdb").c_str(), X_OK) == 0) {
        best_ver = ver;
        best = bin;
      }
    }
    closedir(d);
  }
  return best;
}

}  // namespace

PgServer::PgServer() {
  bin_ = FindBinDir();
  if (bin_.empty()) {
    error_ = "no PostgreSQL server under /usr/lib/postgresql/*/bin (scripts/install-deps.sh)";
    return;
  }
  char tmpl[] = "/tmp/memoryd-pgserver-XXXXXX";
  if (!mkdtemp(tmpl)) {
    error_ = std::string("mkdtemp: ") + std::strerror(errno);
    return;
  }
  dir_ = tmpl;
  data_ = dir_ + "/data";
  as_postgres_ = geteuid() == 0;
  if (as_postgres_) {
    struct passwd* pw = getpwnam("postgres");
    if (!pw || chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      error_ = "running as root needs the postgres user to own " + dir_;
      return;
    }
  }
  port_ = FreePort();
  if (!Run({bin_ + "/initdb", "-D", data_, "-U", "postgres", "-A", "trust", "--no-sync", "-E",
            "UTF8", "--locale=C"},
           "initdb"))
    return;
  std::ofstream conf(data_ + "/postgresql.conf", std::ios::app);
  conf << "listen_addresses = '127.0.0.1'\nport = " << port_ << "\nunix_socket_directories = '"
       << dir_ << "'\nfsync = off\n"
       << "synchronous_commit = off\nshared_buffers = 16MB\nmax_connections = 40\n";
  conf.close();
  ok_ = Start();
}

PgServer::~PgServer() {
  if (frozen_) Thaw();  // a stopped server would not stop
  if (running_)
    Run({bin_ + "/pg_ctl", "-D", data_, "-m", "immediate", "-w", "-t", "30", "stop"}, "stop");
  if (!dir_.empty()) {
    std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) {
      // Best effort: a leftover directory under /tmp is harmless.
    }
  }
}

std::string PgServer::url() const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=postgres user=postgres";
}

bool PgServer::Stop() {
  if (!Run({bin_ + "/pg_ctl", "-D", data_, "-m", "fast", "-w", "-t", "30", "stop"}, "pg_ctl stop"))
    return false;
  running_ = false;
  return true;
}

bool PgServer::Start() {
  if (!Run({bin_ + "/pg_ctl", "-D", data_, "-l", data_ + "/server.log", "-w", "-t", "30", "start"},
           "pg_ctl start"))
    return false;
  running_ = true;
  return true;
}

bool PgServer::Run(const std::vector<std::string>& argv, const std::string& what) {
  std::vector<std::string> full;
  if (as_postgres_) full = {"runuser", "-u", "postgres", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  std::string out = dir_ + "/" + what.substr(0, what.find(' ')) + ".out";
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir("/") != 0) _exit(126);
    FILE* f = std::fopen(out.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> args;
    for (auto& a : full) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::ifstream f(out);
    std::stringstream ss;
    ss << f.rdbuf();
    error_ = what + " failed: " + ss.str() + LogTail();
    return false;
  }
  return true;
}

std::string PgServer::LogTail() const {
  std::ifstream f(data_ + "/server.log");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > 2000 ? "\n...log: " + s.substr(s.size() - 2000) : "\nlog: " + s;
}

// The postmaster's pid is the first line of postmaster.pid; its children
// are found by their parent pid in /proc/<pid>/stat.
bool PgServer::SignalAll(int sig, const std::string& what) {
  std::ifstream pidfile(data_ + "/postmaster.pid");
  int postmaster = 0;
  if (!(pidfile >> postmaster) || postmaster <= 0) {
    error_ = what + ": no postmaster.pid in " + data_;
    return false;
  }
  std::vector<int> pids = {postmaster};
  if (DIR* d = opendir("/proc")) {
    while (struct dirent* e = readdir(d)) {
      int pid = std::atoi(e->d_name);
      if (pid <= 0) continue;
      std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
      std::string line;
      if (!std::getline(stat, line)) continue;
      // pid (comm) state ppid ...: comm may hold spaces, so parse after ')'.
      size_t close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 1));
      std::string state;
      int ppid = 0;
      if (rest >> state >> ppid && ppid == postmaster) pids.push_back(pid);
    }
    closedir(d);
  }
  // Children first on SIGSTOP, the postmaster first on SIGCONT: either way
  // no child is left running under a stopped parent for long.
  if (sig == SIGCONT) {
    for (int pid : pids) kill(pid, sig);
  } else {
    for (size_t i = pids.size(); i-- > 0;) kill(pids[i], sig);
  }
  return true;
}

bool PgServer::Freeze() { return frozen_ = SignalAll(SIGSTOP, "freeze"); }
bool PgServer::Thaw() {
  frozen_ = false;
  return SignalAll(SIGCONT, "thaw");
}
