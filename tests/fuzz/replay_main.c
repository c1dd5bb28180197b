/* replay_main: a stand-in for libFuzzer's driver, so every fuzz target also
 * builds with gcc as a plain cc_test. It replays the seed files and
 * directories named on the command line, then a fixed-seed sweep of
 * pseudo-random inputs (mostly mutations of those seeds), all on one thread
 * with an 8 MiB stack -- what a memoryd worker thread gets by default -- so
 * a recursion that would overflow a worker overflows here too, whatever
 * `ulimit -s` the test runner has.
 *
 * usage: replay [--iterations=N] [--seed=N] [--verbose] PATH...
 *
 * On a crash (abort, ASan report, SIGSEGV) it names the input and, when
 * $TEST_UNDECLARED_OUTPUTS_DIR (Bazel) or $FUZZ_REPLAY_CRASH_DIR is set,
 * saves its bytes there as crash-input for `run.sh`-style reproduction. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_target.h"

#define WORKER_STACK (8u << 20)
#define SWEEP_MAX_LEN 4096 /* libFuzzer's default -max_len */

typedef struct {
  char *label;
  uint8_t *data;
  size_t len;
} input;

static input *inputs;
static size_t n_inputs;
static unsigned long iterations = 4000;
static uint64_t rng_state = 0x6d656d6f72796421ull; /* "memoryd!" */
static int verbose;

/* What the crash handler reports: set before every call. */
static const char *volatile cur_label;
static const uint8_t *volatile cur_data;
static volatile size_t cur_len;
static char crash_path[4096];
static struct sigaction prev_action[32];

static void die(const char *what, const char *arg) {
  fprintf(stderr, "replay: %s %s: %s\n", what, arg, strerror(errno));
  exit(2);
}

static void put_err(const char *s) {
  ssize_t rc = write(2, s, strlen(s));
  (void)rc;
}

/* Async-signal-safe: write(2)/open(2) only, then hand the signal on to
 * whoever had it before (ASan's reporter) or to the default action. */
static void on_crash(int sig, siginfo_t *info, void *ctx) {
  /* ASan's SIGSEGV report ends in abort(): name the input only once. */
  static volatile sig_atomic_t reported;
  if (reported++) goto pass_on;
  put_err("\nreplay: crashed on input: ");
  put_err(cur_label ? cur_label : "(none)");
  put_err("\n");
  if (crash_path[0] && cur_data) {
    int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t rc = write(fd, (const void *)cur_data, cur_len);
      (void)rc;
      close(fd);
      put_err("replay: input bytes saved to ");
      put_err(crash_path);
      put_err("\n");
    }
  }
pass_on:;
  struct sigaction *prev = &prev_action[sig];
  if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
    prev->sa_sigaction(sig, info, ctx);
  } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_crash_handlers(void) {
  const char *dir = getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (!dir) dir = getenv("FUZZ_REPLAY_CRASH_DIR");
  if (dir) snprintf(crash_path, sizeof crash_path, "%s/crash-input", dir);
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(sigs[i], &sa, &prev_action[sigs[i]]);
  }
}

/* A stack overflow can only be reported from a separate signal stack. The
 * sanitizers install one per thread; keep theirs, else add ours. */
static void ensure_signal_stack(void) {
  stack_t cur;
  if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE)) return;
  static char alt[256 << 10];
  stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
  sigaltstack(&ss, NULL);
}

static void add_input(const char *label, uint8_t *data, size_t len) {
  input *grown = realloc(inputs, (n_inputs + 1) * sizeof *inputs);
  char *l = strdup(label);
  if (!grown || !l) die("out of memory", label);
  inputs = grown;
  inputs[n_inputs++] = (input){l, data, len};
}

static void load_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open", path);
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  if (!buf || ferror(f)) die("cannot read", path);
  fclose(f);
  add_input(path, buf, len);
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files of a directory in name order (readdir order would make the sweep,
 * which draws from the seeds by index, differ between machines). */
static void load_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) die("cannot open directory", path);
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char **grown = realloc(names, (n + 1) * sizeof *names);
    if (!grown) die("out of memory", path);
    names = grown;
    size_t sz = strlen(path) + strlen(e->d_name) + 2;
    if (!(names[n] = malloc(sz))) die("out of memory", path);
    snprintf(names[n++], sz, "%s/%s", path, e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_names);
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) load_file(names[i]);
    free(names[i]);
  }
  free(names);
}

static void load_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) die("cannot stat", path);
  if (S_ISDIR(st.st_mode))
    load_dir(path);
  else
    load_file(path);
}

/* xorshift64*: tiny, deterministic everywhere. */
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t rnd_below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* Runs one input from an exact-size heap copy, so ASan flags a read one
 * byte past the end just as libFuzzer's driver would. */
static void run_one(const char *label, const uint8_t *data, size_t len) {
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy) die("out of memory", label);
  if (len) memcpy(copy, data, len);
  cur_label = label;
  cur_data = copy;
  cur_len = len;
  if (verbose) fprintf(stderr, "replay: %s (%zu bytes)\n", label, len);
  LLVMFuzzerTestOneInput(copy, len);
  cur_data = NULL;
  free(copy);
}

/* libFuzzer-like byte mutations: enough to walk a parser off its happy path
 * near real inputs, which pure noise rarely does for structured formats. */
static size_t mutate(uint8_t *buf, size_t len, size_t cap) {
  static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '/', ':', '@', '=', '-'};
  int rounds = 1 + (int)rnd_below(8);
  for (int r = 0; r < rounds; r++) {
    size_t pos = rnd_below(len);
    switch (rnd_below(7)) {
      case 0: /* flip a bit */
        if (len) buf[pos] ^= (uint8_t)(1u << rnd_below(8));
        break;
      case 1: /* random byte */
        if (len) buf[pos] = (uint8_t)rnd();
        break;
      case 2: /* interesting byte */
        if (len) buf[pos] = interesting[rnd_below(sizeof interesting)];
        break;
      case 3: /* insert a byte */
        if (len < cap) {
          memmove(buf + pos + 1, buf + pos, len - pos);
          buf[pos] = (uint8_t)rnd();
          len++;
        }
        break;
      case 4: /* delete a run */
        if (len) {
          size_t n = 1 + rnd_below(len - pos < 16 ? len - pos : 16);
          memmove(buf + pos, buf + pos + n, len - pos - n);
          len -= n;
        }
        break;
      case 5: /* truncate */
        len = rnd_below(len + 1);
        break;
      default: /* copy a run over another place */
        if (len > 1) {
          size_t from = rnd_below(len), n = 1 + rnd_below(32);
          if (n > len - from) n = len - from;
          if (n > len - pos) n = len - pos;
          memmove(buf + pos, buf + from, n);
        }
    }
  }
  return len;
}

static void sweep(void) {
  size_t cap = SWEEP_MAX_LEN;
  for (size_t i = 0; i < n_inputs; i++)
    if (inputs[i].len + 64 > cap) cap = inputs[i].len + 64;
  uint8_t *buf = malloc(cap);
  if (!buf) die("out of memory", "sweep");
  char label[512];
  for (unsigned long it = 0; it < iterations; it++) {
    size_t len;
    /* Three in four mutate a seed; the rest are plain noise. */
    if (n_inputs && rnd_below(4) != 0) {
      const input *seed = &inputs[rnd_below(n_inputs)];
      memcpy(buf, seed->data, seed->len);
      len = mutate(buf, seed->len, cap);
      snprintf(label, sizeof label, "sweep #%lu (mutation of %s)", it, seed->label);
    } else {
      len = rnd_below(257);
      for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)rnd();
      snprintf(label, sizeof label, "sweep #%lu (random)", it);
    }
    run_one(label, buf, len);
  }
  free(buf);
}

static void *replay_all(void *arg) {
  (void)arg;
  ensure_signal_stack();
  for (size_t i = 0; i < n_inputs; i++) run_one(inputs[i].label, inputs[i].data, inputs[i].len);
  sweep();
  return NULL;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--iterations=", 13) == 0)
      iterations = strtoul(a + 13, NULL, 10);
    else if (strncmp(a, "--seed=", 7) == 0)
      rng_state = strtoull(a + 7, NULL, 10) | 1;
    else if (strcmp(a, "--verbose") == 0)
      verbose = 1;
    else
      load_path(a);
  }
  install_crash_handlers();
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, WORKER_STACK);
  if ((errno = pthread_create(&t, &attr, replay_all, NULL)) != 0) die("cannot start", "thread");
  pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  printf("replay: %zu seed input(s) and %lu sweep input(s) ran clean\n", n_inputs, iterations);
  for (size_t i = 0; i < n_inputs; i++) {
    free(inputs[i].label);
    free(inputs[i].data);
  }
  free(inputs);
  return 0;
}
