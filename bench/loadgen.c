/* loadgen: closed-loop load generator for any unary gRPC method, written on the
 * gRPC C core. It keeps --concurrency calls in flight over --channels HTTP/2
 * connections and reports throughput and latency as one human-readable line and
 * one JSON line on stdout (diagnostics go to stderr).
 *
 * Ownership: every object is created in main() and freed there in reverse
 * order; a worker thread owns its completion queue and the call slots bound to
 * it, so per-call state is never shared between threads and needs no lock. */

#include <errno.h>
#include <getopt.h>
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOADGEN_DEFAULT_METHOD "/grpc.health.v1.Health/Check"
#define LOADGEN_MAX_CONCURRENCY 100000
#define LOADGEN_MAX_CHANNELS 1024
#define LOADGEN_MAX_THREADS 64
/* Stragglers get this long after the window closes before they are cancelled:
 * long enough for a healthy server, short enough that a hung one can't hold
 * the benchmark hostage until the per-call deadline. */
#define LOADGEN_DRAIN_GRACE_NS (1000 * 1000 * 1000LL)
/* Workers wake at least this often so they notice the end of the window even
 * when no completion arrives (server stalled). */
#define LOADGEN_POLL_MS 100
#define LOADGEN_NUM_CODES 17 /* GRPC_STATUS_OK .. GRPC_STATUS_UNAUTHENTICATED */

/* ---- latency histogram ---------------------------------------------------
 * HDR-style log-linear histogram over nanoseconds: values below 256 ns get a
 * bucket each; above that every power of two is split into 128 equal buckets.
 * A bucket is at most 1/128 of its lower bound wide, and we report its
 * midpoint, so a percentile is within 0.4% of the exact order statistic. The
 * maximum (and minimum, sum) are tracked exactly. 7424 buckets cover all of
 * uint64 and take 58 KiB per worker, independent of run length. */
#define HIST_SUB_BITS 7
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

typedef struct {
  uint64_t count;
  uint64_t min_ns;
  uint64_t max_ns;
  uint64_t sum_ns;
  uint64_t b[HIST_BUCKETS];
} hist;

static unsigned hist_index(uint64_t v) {
  if (v < 2 * HIST_SUB) return (unsigned)v;
  unsigned msb = 63u - (unsigned)__builtin_clzll(v);
  unsigned shift = msb - HIST_SUB_BITS;
  return (shift + 1) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
}

/* Midpoint of bucket i (inverse of hist_index). */
static uint64_t hist_value(unsigned i) {
  if (i < 2 * HIST_SUB) return i;
  unsigned shift = i / HIST_SUB - 1;
  uint64_t lower = (uint64_t)(i % HIST_SUB + HIST_SUB) << shift;
  return lower + ((1ull << shift) >> 1);
}

static void hist_init(hist *h) {
  memset(h, 0, sizeof *h);
  h->min_ns = UINT64_MAX;
}

static void hist_record(hist *h, uint64_t v) {
  h->b[hist_index(v)]++;
  h->count++;
  h->sum_ns += v;
  if (v < h->min_ns) h->min_ns = v;
  if (v > h->max_ns) h->max_ns = v;
}

static void hist_merge(hist *into, const hist *from) {
  for (unsigned i = 0; i < HIST_BUCKETS; i++) into->b[i] += from->b[i];
  into->count += from->count;
  into->sum_ns += from->sum_ns;
  if (from->min_ns < into->min_ns) into->min_ns = from->min_ns;
  if (from->max_ns > into->max_ns) into->max_ns = from->max_ns;
}

/* Nearest-rank percentile, clamped to the exact min/max so p100 == max. */
static uint64_t hist_percentile(const hist *h, double p) {
  if (h->count == 0) return 0;
  double exact = p / 100.0 * (double)h->count;
  uint64_t rank = (uint64_t)exact;
  if ((double)rank < exact) rank++;
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < HIST_BUCKETS; i++) {
    seen += h->b[i];
    if (seen >= rank) {
      uint64_t v = hist_value(i);
      if (v > h->max_ns) v = h->max_ns;
      if (v < h->min_ns) v = h->min_ns;
      return v;
    }
  }
  return h->max_ns;
}

/* ---- configuration -------------------------------------------------------- */

typedef struct {
  const char *target;
  const char *method;
  const char *label;      /* optional tag copied into the JSON line */
  grpc_slice request;     /* raw protobuf bytes, owned */
  grpc_metadata *headers; /* key/value slices owned, array from malloc */
  size_t nheaders;
  double duration_s;
  double warmup_s;
  double connect_timeout_s;
  int deadline_ms; /* 0: no per-call deadline */
  int concurrency;
  int channels;
  int threads;
  grpc_status_code expect; /* calls ending with this code are successes */
} options;

/* The C core exports no status-name function. */
static const char *const status_names[LOADGEN_NUM_CODES] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

static const char *status_name(int code) {
  return code >= 0 && code < LOADGEN_NUM_CODES ? status_names[code] : "?";
}

/* ---- run state shared by all workers --------------------------------------- */

typedef struct {
  const options *opt;
  int64_t warm_end_ns;
  /* Written by main when a signal cuts the run short; read by workers on every
   * completion, hence atomic. */
  _Atomic int64_t end_ns;
  atomic_flag first_error_printed;
} run_state;

typedef struct worker worker;

/* One in-flight call. The tag handed to grpc_call_start_batch is the slot
 * itself; all receive buffers live here until the batch completes. */
typedef struct {
  worker *w;
  grpc_channel *channel;
  void *registered_method; /* owned by the channel */
  grpc_call *call;         /* NULL while idle */
  int64_t start_ns;
  grpc_byte_buffer *send_buf;
  grpc_byte_buffer *recv_buf;
  grpc_metadata_array initial_md;
  grpc_metadata_array trailing_md;
  grpc_status_code status;
  grpc_slice details;
  const char *error_string;
} call_slot;

typedef struct {
  int code;
  int64_t at_ns;
  char *details; /* malloc'd; NULL until the first error */
  char *debug;   /* malloc'd core error_string, may stay NULL */
} first_error;

struct worker {
  pthread_t tid;
  run_state *run;
  grpc_completion_queue *cq;
  call_slot *slots;
  size_t nslots;
  size_t inflight;
  int cancelled;
  hist lat; /* successful calls completed inside the window */
  uint64_t calls;
  uint64_t errors;
  uint64_t by_code[LOADGEN_NUM_CODES];
  first_error ferr;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- one call --------------------------------------------------------------- */

static void slot_release(call_slot *s) {
  grpc_byte_buffer_destroy(s->send_buf);
  if (s->recv_buf) grpc_byte_buffer_destroy(s->recv_buf);
  grpc_metadata_array_destroy(&s->initial_md);
  grpc_metadata_array_destroy(&s->trailing_md);
  grpc_slice_unref(s->details);
  gpr_free((void *)s->error_string);
  grpc_call_unref(s->call);
  s->send_buf = NULL;
  s->recv_buf = NULL;
  s->error_string = NULL;
  s->call = NULL;
}

static int slot_start(call_slot *s) {
  worker *w = s->w;
  const options *o = w->run->opt;
  gpr_timespec deadline = o->deadline_ms > 0
                              ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                             gpr_time_from_millis(o->deadline_ms, GPR_TIMESPAN))
                              : gpr_inf_future(GPR_CLOCK_MONOTONIC);
  s->call = grpc_channel_create_registered_call(s->channel, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq,
                                                s->registered_method, deadline, NULL);
  /* SEND_MESSAGE consumes the buffer's slices, so each call needs its own
   * buffer; it only takes a ref on the shared request slice. */
  grpc_slice req = o->request;
  s->send_buf = grpc_raw_byte_buffer_create(&req, 1);
  s->recv_buf = NULL;
  grpc_metadata_array_init(&s->initial_md);
  grpc_metadata_array_init(&s->trailing_md);
  s->details = grpc_empty_slice();
  s->error_string = NULL;
  s->status = GRPC_STATUS_UNKNOWN;

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[0].data.send_initial_metadata.count = o->nheaders;
  ops[0].data.send_initial_metadata.metadata = o->headers;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = s->send_buf;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &s->recv_buf;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &s->trailing_md;
  ops[5].data.recv_status_on_client.status = &s->status;
  ops[5].data.recv_status_on_client.status_details = &s->details;
  ops[5].data.recv_status_on_client.error_string = &s->error_string;

  s->start_ns = now_ns();
  grpc_call_error err = grpc_call_start_batch(s->call, ops, 6, s, NULL);
  if (err != GRPC_CALL_OK) {
    /* Only a bug or illegal metadata gets here; the slot stays idle. */
    fprintf(stderr, "loadgen: grpc_call_start_batch: %s\n", grpc_call_error_to_string(err));
    slot_release(s);
    return -1;
  }
  w->inflight++;
  return 0;
}

static void note_first_error(worker *w, const call_slot *s, int code, int64_t now) {
  if (w->ferr.details) return;
  w->ferr.code = code;
  w->ferr.at_ns = now;
  w->ferr.details =
      strndup((const char *)GRPC_SLICE_START_PTR(s->details), GRPC_SLICE_LENGTH(s->details));
  /* The core's error_string says why a call failed locally (connection
   * refused, deadline, ...) when the peer's details are empty. */
  if (s->error_string) w->ferr.debug = strdup(s->error_string);
  /* Tell the operator at once, not only in the JSON: a 10-minute run of
   * UNAUTHENTICATED calls should be obvious in the first second. */
  if (!atomic_flag_test_and_set(&w->run->first_error_printed))
    fprintf(stderr, "loadgen: first error: %s (%d): \"%s\" [core: %s]\n", status_name(code), code,
            w->ferr.details ? w->ferr.details : "", w->ferr.debug ? w->ferr.debug : "-");
}

static void slot_complete(call_slot *s, int success, int64_t now) {
  worker *w = s->w;
  run_state *r = w->run;
  int code = success ? (int)s->status : GRPC_STATUS_UNKNOWN;
  if (code < 0 || code >= LOADGEN_NUM_CODES) code = GRPC_STATUS_UNKNOWN;
  int ok = code == (int)r->opt->expect;
  int64_t end = atomic_load_explicit(&r->end_ns, memory_order_relaxed);
  /* After the window the only errors are our own drain cancellations. */
  if (!ok && now < end) note_first_error(w, s, code, now);
  if (now >= r->warm_end_ns && now < end) {
    w->calls++;
    w->by_code[code]++;
    if (ok)
      hist_record(&w->lat, (uint64_t)(now - s->start_ns));
    else
      w->errors++;
  }
  slot_release(s);
}

/* ---- worker thread ---------------------------------------------------------- */

static void worker_cancel_all(worker *w) {
  for (size_t i = 0; i < w->nslots; i++)
    if (w->slots[i].call) grpc_call_cancel(w->slots[i].call, NULL);
  w->cancelled = 1;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  run_state *r = w->run;
  for (size_t i = 0; i < w->nslots; i++) slot_start(&w->slots[i]);
  while (w->inflight > 0) {
    gpr_timespec wake = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                     gpr_time_from_millis(LOADGEN_POLL_MS, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(w->cq, wake, NULL);
    int64_t now = now_ns();
    int64_t end = atomic_load_explicit(&r->end_ns, memory_order_relaxed);
    if (ev.type == GRPC_OP_COMPLETE) {
      call_slot *s = ev.tag;
      w->inflight--;
      slot_complete(s, ev.success, now);
      /* Closed loop: the slot immediately issues its next call. */
      if (now < end) slot_start(s);
    } else if (ev.type == GRPC_QUEUE_SHUTDOWN) {
      break; /* cannot happen before we shut the queue down; be safe */
    }
    if (!w->cancelled && now >= end + LOADGEN_DRAIN_GRACE_NS) worker_cancel_all(w);
  }
  return NULL;
}

/* ---- channels --------------------------------------------------------------- */

static grpc_channel *channel_create(const options *o, grpc_channel_credentials *creds) {
  /* Built by hand: the grpc_channel_arg_*_create helpers are not exported as C
   * symbols by Debian's libgrpc. */
  grpc_arg args[4];
  memset(args, 0, sizeof args);
  /* Without a local pool, channels with equal args share one subchannel and
   * --channels would silently mean a single TCP connection. */
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
  args[0].value.integer = 1;
  /* Transparent retries would hide errors and add a buffering filter to every
   * call; a load generator wants to see the server's raw behaviour. */
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = GRPC_ARG_ENABLE_RETRIES;
  args[1].value.integer = 0;
  args[2].type = GRPC_ARG_INTEGER;
  args[2].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[2].value.integer = -1;
  args[3].type = GRPC_ARG_STRING;
  args[3].key = GRPC_ARG_PRIMARY_USER_AGENT_STRING;
  args[3].value.string = "memoryd-loadgen";
  grpc_channel_args ca = {.num_args = 4, .args = args};
  return grpc_channel_create(o->target, creds, &ca);
}

/* Connect every channel before the clock starts, so warm-up measures the
 * server and not TCP + HTTP/2 set-up, and an absent server fails fast with a
 * clear message instead of a flood of UNAVAILABLE. */
static int channels_wait_ready(grpc_channel **ch, int n, double timeout_s) {
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                   gpr_time_from_millis((int64_t)(timeout_s * 1000), GPR_TIMESPAN));
  int rc = 0;
  for (int i = 0; i < n; i++) grpc_channel_check_connectivity_state(ch[i], 1);
  for (int i = 0; i < n && rc == 0; i++) {
    grpc_connectivity_state st;
    while ((st = grpc_channel_check_connectivity_state(ch[i], 1)) != GRPC_CHANNEL_READY) {
      grpc_channel_watch_connectivity_state(ch[i], st, deadline, cq, NULL);
      grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
      if (ev.type != GRPC_OP_COMPLETE || !ev.success) { /* deadline passed */
        rc = -1;
        break;
      }
    }
  }
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  return rc;
}

/* ---- flags ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: loadgen --target HOST:PORT [flags]\n"
          "\n"
          "Closed-loop load generator for one unary gRPC method (gRPC C core, insecure\n"
          "channels). Keeps --concurrency calls in flight over --channels connections for\n"
          "--warmup + --duration seconds; prints one human-readable line and one JSON line\n"
          "on stdout for the --duration window.\n"
          "\n"
          "  --target HOST:PORT      server address (required; any gRPC target URI works)\n"
          "  --method PATH           full method path (default %s)\n"
          "  --request-hex HEX       request message as raw protobuf bytes in hex, no gRPC\n"
          "                          frame prefix (default: empty message)\n"
          "  --request-file FILE     request message as raw protobuf bytes read from FILE\n"
          "  --header 'NAME: VALUE'  request metadata, repeatable (e.g. 'authorization:\n"
          "                          Bearer xyz'); names are lower-cased; '-bin' names take\n"
          "                          raw bytes\n"
          "  --duration S            measured window in seconds (default 10)\n"
          "  --warmup S              unmeasured seconds before the window (default 2)\n"
          "  --concurrency N         calls kept in flight (default 64)\n"
          "  --channels M            channels = TCP connections; calls are spread round-\n"
          "                          robin (default 4)\n"
          "  --threads T             completion-queue threads, one queue each (default 1)\n"
          "  --deadline-ms MS        per-call deadline, 0 = none (default 10000)\n"
          "  --connect-timeout S     give up if the channels are not READY by then\n"
          "                          (default 5)\n"
          "  --expect-code CODE      status counted as success, number or name, e.g.\n"
          "                          UNAUTHENTICATED to load a rejection path (default OK)\n"
          "  --label NAME            copied into the JSON line as \"label\"\n"
          "  --help                  this text\n"
          "\n"
          "Output: 'calls' = calls completed in the window, 'errors' = those whose status\n"
          "was not --expect-code; qps and latencies count successful calls only.\n"
          "Latency runs from just before grpc_call_start_batch to the dequeued completion\n"
          "(CLOCK_MONOTONIC) and is kept in a log-linear histogram: percentiles within\n"
          "0.4%%, max exact. The first error's status and details go to stderr at once.\n"
          "SIGINT/SIGTERM end the window early and still report.\n"
          "\n"
          "Exit: 0 run completed with at least one successful call; 1 bad flags or the\n"
          "target could not be reached; 2 every call in the window failed (or none ran).\n",
          LOADGEN_DEFAULT_METHOD);
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *s == '\0' || *end != '\0' || v < lo || v > hi) {
    fprintf(stderr, "loadgen: %s wants an integer in [%d, %d], got '%s'\n", flag, lo, hi, s);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int parse_seconds(const char *flag, const char *s, double lo, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *s == '\0' || *end != '\0' || !(v >= lo) || v > 86400) {
    fprintf(stderr, "loadgen: %s wants seconds >= %g, got '%s'\n", flag, lo, s);
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_code(const char *s, grpc_status_code *out) {
  for (int i = 0; i < LOADGEN_NUM_CODES; i++)
    if (strcasecmp(s, status_names[i]) == 0) {
      *out = (grpc_status_code)i;
      return 0;
    }
  int v;
  if (parse_int("--expect-code", s, 0, LOADGEN_NUM_CODES - 1, &v)) return -1;
  *out = (grpc_status_code)v;
  return 0;
}

static int hex_nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Whitespace and ':' are skipped so dumps like "0a 03 66:6f:6f" paste as is. */
static int parse_hex(const char *s, grpc_slice *out) {
  size_t n = strlen(s);
  unsigned char *buf = malloc(n / 2 + 1);
  size_t len = 0;
  int hi = -1;
  if (!buf) return -1;
  for (const char *p = s; *p; p++) {
    if (*p == ' ' || *p == ':' || *p == '\t' || *p == '\n') continue;
    int v = hex_nibble(*p);
    if (v < 0) {
      fprintf(stderr, "loadgen: --request-hex: bad hex digit '%c'\n", *p);
      free(buf);
      return -1;
    }
    if (hi < 0) {
      hi = v;
    } else {
      buf[len++] = (unsigned char)(hi << 4 | v);
      hi = -1;
    }
  }
  if (hi >= 0) {
    fprintf(stderr, "loadgen: --request-hex: odd number of hex digits\n");
    free(buf);
    return -1;
  }
  *out = grpc_slice_from_copied_buffer((const char *)buf, len);
  free(buf);
  return 0;
}

static int read_file(const char *path, grpc_slice *out) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "loadgen: --request-file %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad) {
    fprintf(stderr, "loadgen: --request-file %s: read failed\n", path);
    free(buf);
    return -1;
  }
  *out = grpc_slice_from_copied_buffer(buf, len);
  free(buf);
  return 0;
}

/* "Name: value" -> lower-case key slice + value slice, checked with the same
 * predicates the core applies, so a bad header fails here and not as a
 * GRPC_CALL_ERROR_INVALID_METADATA on every call. */
static int parse_header(const char *s, options *o) {
  const char *colon = strchr(s, ':');
  if (!colon || colon == s) {
    fprintf(stderr, "loadgen: --header wants 'name: value', got '%s'\n", s);
    return -1;
  }
  size_t klen = (size_t)(colon - s);
  while (klen > 0 && (s[klen - 1] == ' ' || s[klen - 1] == '\t')) klen--;
  char *key = strndup(s, klen);
  if (!key) return -1;
  for (char *p = key; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  const char *val = colon + 1;
  while (*val == ' ' || *val == '\t') val++;

  grpc_slice ks = grpc_slice_from_copied_string(key);
  grpc_slice vs = grpc_slice_from_copied_string(val);
  free(key);
  if (!grpc_header_key_is_legal(ks) ||
      (!grpc_is_binary_header(ks) && !grpc_header_nonbin_value_is_legal(vs))) {
    fprintf(stderr, "loadgen: --header '%s' is not legal gRPC metadata\n", s);
    grpc_slice_unref(ks);
    grpc_slice_unref(vs);
    return -1;
  }
  grpc_metadata *h = realloc(o->headers, (o->nheaders + 1) * sizeof *h);
  if (!h) {
    grpc_slice_unref(ks);
    grpc_slice_unref(vs);
    return -1;
  }
  o->headers = h;
  memset(&h[o->nheaders], 0, sizeof *h);
  h[o->nheaders].key = ks;
  h[o->nheaders].value = vs;
  o->nheaders++;
  return 0;
}

static void options_free(options *o) {
  for (size_t i = 0; i < o->nheaders; i++) {
    grpc_slice_unref(o->headers[i].key);
    grpc_slice_unref(o->headers[i].value);
  }
  free(o->headers);
  grpc_slice_unref(o->request);
}

enum {
  OPT_TARGET = 256,
  OPT_METHOD,
  OPT_REQ_HEX,
  OPT_REQ_FILE,
  OPT_HEADER,
  OPT_DURATION,
  OPT_WARMUP,
  OPT_CONCURRENCY,
  OPT_CHANNELS,
  OPT_THREADS,
  OPT_DEADLINE,
  OPT_CONNECT,
  OPT_EXPECT,
  OPT_LABEL,
  OPT_HELP
};

/* Returns 0 to run, 1 after --help, -1 on a bad flag (message printed). */
static int parse_flags(int argc, char **argv, options *o) {
  static const struct option longopts[] = {
      {"target", required_argument, NULL, OPT_TARGET},
      {"method", required_argument, NULL, OPT_METHOD},
      {"request-hex", required_argument, NULL, OPT_REQ_HEX},
      {"request-file", required_argument, NULL, OPT_REQ_FILE},
      {"header", required_argument, NULL, OPT_HEADER},
      {"duration", required_argument, NULL, OPT_DURATION},
      {"warmup", required_argument, NULL, OPT_WARMUP},
      {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
      {"channels", required_argument, NULL, OPT_CHANNELS},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"deadline-ms", required_argument, NULL, OPT_DEADLINE},
      {"connect-timeout", required_argument, NULL, OPT_CONNECT},
      {"expect-code", required_argument, NULL, OPT_EXPECT},
      {"label", required_argument, NULL, OPT_LABEL},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0}};
  int have_request = 0, c, rc = 0;
  while (rc == 0 && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
      case OPT_TARGET:
        o->target = optarg;
        break;
      case OPT_METHOD:
        o->method = optarg;
        break;
      case OPT_REQ_HEX:
      case OPT_REQ_FILE:
        if (have_request) {
          fprintf(stderr, "loadgen: give one --request-hex or --request-file\n");
          rc = -1;
          break;
        }
        grpc_slice_unref(o->request);
        rc = c == OPT_REQ_HEX ? parse_hex(optarg, &o->request) : read_file(optarg, &o->request);
        if (rc) o->request = grpc_empty_slice();
        have_request = 1;
        break;
      case OPT_HEADER:
        rc = parse_header(optarg, o);
        break;
      case OPT_DURATION:
        rc = parse_seconds("--duration", optarg, 0.001, &o->duration_s);
        break;
      case OPT_WARMUP:
        rc = parse_seconds("--warmup", optarg, 0, &o->warmup_s);
        break;
      case OPT_CONNECT:
        rc = parse_seconds("--connect-timeout", optarg, 0.001, &o->connect_timeout_s);
        break;
      case OPT_CONCURRENCY:
        rc = parse_int("--concurrency", optarg, 1, LOADGEN_MAX_CONCURRENCY, &o->concurrency);
        break;
      case OPT_CHANNELS:
        rc = parse_int("--channels", optarg, 1, LOADGEN_MAX_CHANNELS, &o->channels);
        break;
      case OPT_THREADS:
        rc = parse_int("--threads", optarg, 1, LOADGEN_MAX_THREADS, &o->threads);
        break;
      case OPT_DEADLINE:
        rc = parse_int("--deadline-ms", optarg, 0, 86400000, &o->deadline_ms);
        break;
      case OPT_EXPECT:
        rc = parse_code(optarg, &o->expect);
        break;
      case OPT_LABEL:
        o->label = optarg;
        break;
      case OPT_HELP:
      case 'h':
        usage(stdout);
        return 1;
      default:
        rc = -1;
        break; /* getopt already complained */
    }
  }
  if (rc == 0 && optind < argc) {
    fprintf(stderr, "loadgen: unexpected argument '%s'\n", argv[optind]);
    rc = -1;
  }
  if (rc == 0 && !o->target) {
    fprintf(stderr, "loadgen: --target is required\n");
    rc = -1;
  }
  if (rc == 0 && o->method[0] != '/') {
    fprintf(stderr, "loadgen: --method must be a full path like %s\n", LOADGEN_DEFAULT_METHOD);
    rc = -1;
  }
  if (rc == 0 && o->concurrency < o->threads) o->threads = o->concurrency;
  if (rc) fprintf(stderr, "loadgen: try --help\n");
  return rc;
}

/* ---- report ----------------------------------------------------------------- */

typedef struct {
  double window_s;
  uint64_t calls, errors, ok;
  uint64_t by_code[LOADGEN_NUM_CODES];
  hist *lat;
  const first_error *ferr;
} summary;

static double us(uint64_t ns) { return (double)ns / 1000.0; }

/* Rounds to 1/scale: one decimal is below the histogram's resolution anyway,
 * and keeps the JSON free of 17-digit binary-float noise. */
static double round_to(double x, double scale) {
  return (double)(int64_t)(x * scale + (x < 0 ? -0.5 : 0.5)) / scale;
}

static double round1(double x) { return round_to(x, 10); }

/* jansson rejects invalid UTF-8; status details come from the peer. */
static json_t *json_text(const char *s) {
  json_t *j = json_string(s);
  if (j) return j;
  char *copy = strdup(s);
  if (!copy) return json_null();
  for (char *p = copy; *p; p++)
    if ((unsigned char)*p >= 0x80) *p = '?';
  j = json_string(copy);
  free(copy);
  return j ? j : json_null();
}

static void report(const options *o, const summary *s) {
  double qps = s->window_s > 0 ? (double)s->ok / s->window_s : 0;
  double mean = s->lat->count ? us(s->lat->sum_ns / s->lat->count) : 0;
  uint64_t p50 = hist_percentile(s->lat, 50), p90 = hist_percentile(s->lat, 90);
  uint64_t p99 = hist_percentile(s->lat, 99);
  uint64_t p999 = hist_percentile(s->lat, 99.9);

  printf(
      "loadgen %s %s c=%d ch=%d t=%d: %.2fs %llu calls %llu errors "
      "%.1f qps | us mean %.1f p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f "
      "max %.1f\n",
      o->target, o->method, o->concurrency, o->channels, o->threads, s->window_s,
      (unsigned long long)s->calls, (unsigned long long)s->errors, qps, mean, us(p50), us(p90),
      us(p99), us(p999), us(s->lat->max_ns));
  if (s->errors) {
    /* Which statuses, so "errors" is actionable without reading the JSON. */
    printf("loadgen errors by status:");
    for (int i = 0; i < LOADGEN_NUM_CODES; i++)
      if (s->by_code[i] && i != (int)o->expect)
        printf(" %s=%llu", status_names[i], (unsigned long long)s->by_code[i]);
    printf("\n");
  }

  json_t *j = json_object();
  if (o->label) json_object_set_new(j, "label", json_text(o->label));
  json_object_set_new(j, "target", json_text(o->target));
  json_object_set_new(j, "method", json_text(o->method));
  json_object_set_new(j, "concurrency", json_integer(o->concurrency));
  json_object_set_new(j, "channels", json_integer(o->channels));
  json_object_set_new(j, "threads", json_integer(o->threads));
  json_object_set_new(j, "duration_s", json_real(round_to(s->window_s, 100)));
  json_object_set_new(j, "calls", json_integer((json_int_t)s->calls));
  json_object_set_new(j, "errors", json_integer((json_int_t)s->errors));
  json_object_set_new(j, "qps", json_real(round1(qps)));
  json_object_set_new(j, "mean_us", json_real(round1(mean)));
  json_object_set_new(j, "p50_us", json_real(round1(us(p50))));
  json_object_set_new(j, "p90_us", json_real(round1(us(p90))));
  json_object_set_new(j, "p99_us", json_real(round1(us(p99))));
  json_object_set_new(j, "p999_us", json_real(round1(us(p999))));
  json_object_set_new(j, "max_us", json_real(round1(us(s->lat->max_ns))));
  json_t *codes = json_object();
  for (int i = 0; i < LOADGEN_NUM_CODES; i++)
    if (s->by_code[i])
      json_object_set_new(codes, status_names[i], json_integer((json_int_t)s->by_code[i]));
  json_object_set_new(j, "status_counts", codes);
  if (s->ferr) {
    json_t *fe = json_object();
    json_object_set_new(fe, "code", json_integer(s->ferr->code));
    json_object_set_new(fe, "name", json_string(status_name(s->ferr->code)));
    json_object_set_new(fe, "details", json_text(s->ferr->details ? s->ferr->details : ""));
    json_object_set_new(fe, "debug", s->ferr->debug ? json_text(s->ferr->debug) : json_null());
    json_object_set_new(j, "first_error", fe);
  } else {
    json_object_set_new(j, "first_error", json_null());
  }
  char *line = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15));
  if (line) puts(line);
  free(line);
  json_decref(j);
  fflush(stdout);
}

/* ---- main ------------------------------------------------------------------- */

/* Sleeps until the window ends or SIGINT/SIGTERM (blocked in every thread, so
 * no async-signal-safety games) cuts it short. */
static void wait_for_end(run_state *r, const sigset_t *sigs) {
  for (;;) {
    int64_t left = atomic_load(&r->end_ns) - now_ns();
    if (left <= 0) return;
    struct timespec ts = {.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
    int sig = sigtimedwait(sigs, NULL, &ts);
    if (sig > 0) {
      fprintf(stderr, "loadgen: signal %d, ending the run early\n", sig);
      atomic_store(&r->end_ns, now_ns());
      return;
    }
  }
}

static int workers_create(worker *ws, int nw, run_state *r, grpc_channel **ch, void **reg,
                          int nch) {
  const options *o = r->opt;
  for (int t = 0; t < nw; t++) {
    worker *w = &ws[t];
    w->run = r;
    hist_init(&w->lat);
    w->cq = grpc_completion_queue_create_for_next(NULL);
    /* Slot i goes to thread i % T and channel i % M. */
    w->nslots = (size_t)(o->concurrency / nw + (t < o->concurrency % nw));
    w->slots = calloc(w->nslots, sizeof *w->slots);
    if (!w->slots) return -1;
    for (size_t k = 0; k < w->nslots; k++) {
      size_t i = k * (size_t)nw + (size_t)t;
      w->slots[k].w = w;
      w->slots[k].channel = ch[i % (size_t)nch];
      w->slots[k].registered_method = reg[i % (size_t)nch];
    }
  }
  return 0;
}

static void workers_destroy(worker *ws, int nw) {
  for (int t = 0; t < nw; t++) {
    worker *w = &ws[t];
    if (w->cq) {
      grpc_completion_queue_shutdown(w->cq);
      while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
             GRPC_QUEUE_SHUTDOWN) {
      }
      grpc_completion_queue_destroy(w->cq);
    }
    free(w->slots);
    free(w->ferr.details);
    free(w->ferr.debug);
  }
}

static int summarize_and_report(const options *o, run_state *r, worker *ws, int nw) {
  summary s;
  memset(&s, 0, sizeof s);
  s.lat = malloc(sizeof *s.lat);
  if (!s.lat) return 1;
  hist_init(s.lat);
  for (int t = 0; t < nw; t++) {
    worker *w = &ws[t];
    hist_merge(s.lat, &w->lat);
    s.calls += w->calls;
    s.errors += w->errors;
    for (int i = 0; i < LOADGEN_NUM_CODES; i++) s.by_code[i] += w->by_code[i];
    if (w->ferr.details && (!s.ferr || w->ferr.at_ns < s.ferr->at_ns)) s.ferr = &w->ferr;
  }
  s.ok = s.calls - s.errors;
  int64_t window = atomic_load(&r->end_ns) - r->warm_end_ns;
  s.window_s = window > 0 ? (double)window / 1e9 : 0;
  if (window <= 0) fprintf(stderr, "loadgen: interrupted during warm-up\n");
  report(o, &s);
  free(s.lat);
  return s.ok > 0 ? 0 : 2;
}

static int run(const options *o, const sigset_t *sigs) {
  int rc = 1, nch = o->channels, nw = o->threads;
  grpc_channel **ch = calloc((size_t)nch, sizeof *ch);
  void **reg = calloc((size_t)nch, sizeof *reg);
  worker *ws = calloc((size_t)nw, sizeof *ws);
  run_state r = {.opt = o, .first_error_printed = ATOMIC_FLAG_INIT};
  if (!ch || !reg || !ws) goto out;

  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  for (int i = 0; i < nch; i++) {
    ch[i] = channel_create(o, creds);
    /* A registered method spares the core a per-call path lookup, as grpc++
     * stubs do, so we don't handicap the server's peer. */
    reg[i] = grpc_channel_register_call(ch[i], o->method, NULL, NULL);
  }
  grpc_channel_credentials_release(creds);

  if (channels_wait_ready(ch, nch, o->connect_timeout_s) != 0) {
    fprintf(stderr,
            "loadgen: %s: channels not READY within %gs (is the "
            "server up?)\n",
            o->target, o->connect_timeout_s);
    goto out;
  }
  if (workers_create(ws, nw, &r, ch, reg, nch) != 0) goto out;

  int64_t t0 = now_ns();
  r.warm_end_ns = t0 + (int64_t)(o->warmup_s * 1e9);
  atomic_init(&r.end_ns, r.warm_end_ns + (int64_t)(o->duration_s * 1e9));
  int started = 0;
  for (; started < nw; started++)
    if (pthread_create(&ws[started].tid, NULL, worker_main, &ws[started])) {
      fprintf(stderr, "loadgen: pthread_create failed\n");
      atomic_store(&r.end_ns, now_ns());
      break;
    }
  wait_for_end(&r, sigs);
  for (int t = 0; t < started; t++) pthread_join(ws[t].tid, NULL);
  if (started == nw) rc = summarize_and_report(o, &r, ws, nw);

out:
  /* Every call is unreffed by now (workers only exit with nothing in flight),
   * so channels can go, then the queues. */
  for (int i = 0; ch && i < nch; i++)
    if (ch[i]) grpc_channel_destroy(ch[i]);
  if (ws) workers_destroy(ws, nw);
  free(ws);
  free(reg);
  free(ch);
  return rc;
}

int main(int argc, char **argv) {
  options o = {
      .method = LOADGEN_DEFAULT_METHOD,
      .request = grpc_empty_slice(),
      .duration_s = 10,
      .warmup_s = 2,
      .connect_timeout_s = 5,
      .deadline_ms = 10000,
      .concurrency = 64,
      .channels = 4,
      .threads = 1,
      .expect = GRPC_STATUS_OK,
  };
  /* Blocked before grpc_init so every thread the core spawns inherits the
   * mask and only sigtimedwait in main ever sees these signals. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);

  /* Before flag parsing: the flags build slices and check metadata. */
  grpc_init();
  int rc = parse_flags(argc, argv, &o);
  if (rc == 0)
    rc = run(&o, &sigs);
  else
    rc = rc > 0 ? 0 : 1;
  options_free(&o);
  grpc_shutdown();
  return rc;
}
