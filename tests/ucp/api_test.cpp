// SPDX-License-Identifier: BSD-3-Clause
// API tests of the UCP face: each case runs in two processes (fork) that
// exchange worker addresses over a socketpair and check every byte they
// receive. Built against weft's ucp.h (the 1.17 superset), linked to
// libucp.so.0 by SONAME: run.sh runs it over weft's libfabric and over
// Debian's (WEFT_UCP_TEST_REAL=1).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <ucm/api/ucm.h>
#include <ucp/api/ucp.h>
#include <ucs/datastruct/string_buffer.h>
#include <ucs/sys/string.h>
#include <uct/api/uct.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_fail = 0;
#define CK(c)                                                                                        \
  do {                                                                                               \
    if (!(c)) {                                                                                      \
      fprintf(stderr, "%s:%d: check failed in pid %d: %s\n", __FILE__, __LINE__, (int)getpid(), #c); \
      g_fail++;                                                                                      \
    }                                                                                                \
  } while (0)

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr uint64_t all_features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 |
                                  UCP_FEATURE_WAKEUP | UCP_FEATURE_STREAM | UCP_FEATURE_AM;

// The application's part of every request (request_size / request_init).
struct app_req {
  uint32_t magic;
  int done;
  ucs_status_t status;
  size_t length;
  ucp_tag_t tag;
};
std::atomic<int> g_req_inits{0};
std::atomic<int> g_req_cleanups{0};
void req_cleanup(void*) {
  g_req_cleanups++;
}
void req_init(void* r) {
  auto* a = static_cast<app_req*>(r);
  a->magic = 0xfeedf00d;
  a->done = 0;
  g_req_inits++;
}

void send_cb(void* r, ucs_status_t st, void*) {
  auto* a = static_cast<app_req*>(r);
  a->done = 1;
  a->status = st;
}
void recv_cb(void* r, ucs_status_t st, const ucp_tag_recv_info_t* info, void*) {
  auto* a = static_cast<app_req*>(r);
  a->done = 1;
  a->status = st;
  a->length = info->length;
  a->tag = info->sender_tag;
}

struct side {
  int sock = -1;
  int rank = 0;
  ucp_context_h ctx = nullptr;
  ucp_worker_h w = nullptr;
  ucp_ep_h ep = nullptr;
  ucs_status_t ep_error = UCS_OK;
  int err_calls = 0;

  void init(uint64_t features = all_features, ucs_thread_mode_t tm = UCS_THREAD_MODE_SINGLE) {
    ucp_config_t* cfg = nullptr;
    CK(ucp_config_read(nullptr, nullptr, &cfg) == UCS_OK);
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_REQUEST_INIT;
    p.features = features;
    p.request_size = sizeof(app_req);
    p.request_init = req_init;
    CK(ucp_init(&p, cfg, &ctx) == UCS_OK);
    ucp_config_release(cfg);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = tm;
    CK(ucp_worker_create(ctx, &wp, &w) == UCS_OK);
  }

  void progress() { ucp_worker_progress(w); }

  // Sends bytes on the socket.
  void put(const void* p, size_t n) { CK(write(sock, p, n) == static_cast<ssize_t>(n)); }
  // Receives bytes from the socket, progressing the worker while waiting.
  bool get(void* p, size_t n, double timeout = 30) {
    size_t got = 0;
    double t0 = now();
    while (got < n) {
      pollfd pf{sock, POLLIN, 0};
      if (poll(&pf, 1, 0) > 0) {
        ssize_t k = read(sock, static_cast<char*>(p) + got, n - got);
        if (k <= 0) return false;
        got += static_cast<size_t>(k);
        continue;
      }
      if (w) progress();
      if (now() - t0 > timeout) return false;
    }
    return true;
  }
  void barrier() {
    char c = 1;
    put(&c, 1);
    CK(get(&c, 1));
  }

  static void on_error(void* arg, ucp_ep_h, ucs_status_t st) {
    auto* s = static_cast<side*>(arg);
    s->ep_error = st;
    s->err_calls++;
  }

  void connect(ucp_err_handling_mode_t mode = UCP_ERR_HANDLING_MODE_NONE) {
    ucp_address_t* a = nullptr;
    size_t len = 0;
    CK(ucp_worker_get_address(w, &a, &len) == UCS_OK);
    uint64_t l = len;
    put(&l, sizeof l);
    put(a, len);
    ucp_worker_release_address(w, a);
    uint64_t pl = 0;
    CK(get(&pl, sizeof pl));
    std::vector<char> peer(pl);
    CK(get(peer.data(), pl));
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_USER_DATA;
    ep.address = reinterpret_cast<ucp_address_t*>(peer.data());
    ep.err_mode = mode;
    ep.err_handler.cb = on_error;
    ep.err_handler.arg = nullptr;
    ep.user_data = this;  // UCX passes user_data to the error handler
    CK(ucp_ep_create(w, &ep, &this->ep) == UCS_OK);
  }

  ucs_status_t wait(void* r, double timeout = 30) {
    if (!UCS_PTR_IS_PTR(r)) return UCS_PTR_STATUS(r);
    double t0 = now();
    ucs_status_t st;
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS) {
      progress();
      if (now() - t0 > timeout) {
        fprintf(stderr, "pid %d: request timed out\n", getpid());
        g_fail++;
        return UCS_ERR_TIMED_OUT;
      }
    }
    ucp_request_free(r);
    return st;
  }

  void close_ep(bool force = false) {
    if (!ep) return;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* r = ucp_ep_close_nbx(ep, &p);
    ucs_status_t st = wait(r);
    CK(st == UCS_OK || st == UCS_ERR_CONNECTION_RESET || st == UCS_ERR_CANCELED);
    ep = nullptr;
  }

  void fini() {
    close_ep();
    if (w) ucp_worker_destroy(w);
    if (ctx) ucp_cleanup(ctx);
    w = nullptr;
    ctx = nullptr;
  }
};

// Runs fn in two processes (rank 0 here, rank 1 in a child); the case passes
// when neither records a failed check.
void two(const std::function<void(side&)>& fn, bool expect_child_killed = false) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    g_fail = 0;
    side s;
    s.sock = sv[1];
    s.rank = 1;
    fn(s);
    _exit(g_fail ? 1 : 0);
  }
  close(sv[1]);
  int before = g_fail;
  side s;
  s.sock = sv[0];
  s.rank = 0;
  fn(s);
  close(sv[0]);
  int status = 0;
  // the child may still be finishing its side: bounded wait
  for (int i = 0; i < 3000; i++) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    usleep(10000);
    if (i == 2999) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
  }
  EXPECT_EQ(g_fail, before) << "rank 0 checks failed";
  if (expect_child_killed) {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank 1 checks failed (status " << status << ")";
  }
}

uint8_t pat(size_t i, int salt) {
  return static_cast<uint8_t>(i * 131 + salt * 17 + (i >> 8));
}
void fill(void* b, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) static_cast<uint8_t*>(b)[i] = pat(i, salt);
}
bool same(const void* b, size_t n, int salt) {
  for (size_t i = 0; i < n; i++)
    if (static_cast<const uint8_t*>(b)[i] != pat(i, salt)) return false;
  return true;
}

ucp_request_param_t send_param() {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
  p.cb.send = send_cb;
  return p;
}
ucp_request_param_t recv_param() {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
  p.cb.recv = recv_cb;
  return p;
}

// ---------------------------------------------------------------- basics
// Each UCX_* value is checked against the face's table (src/ucp/settings.hpp):
// ucp_config_modify refuses one it does not accept, a transport name weft
// does not have is said in UCX's words, and ucp_init then names the setting
// that left it nothing.
TEST(ucp, config_values_checked) {
  ucp_config_t* cfg = nullptr;
  ASSERT_EQ(ucp_config_read(nullptr, nullptr, &cfg), UCS_OK);
  testing::internal::CaptureStderr();
  EXPECT_EQ(ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", "abc"), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(ucp_config_modify(cfg, "UCX_WEFT_RX_SIZE", "5"), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(ucp_config_modify(cfg, "LOG_LEVEL", "loud"), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", "500ms"), UCS_OK);
  EXPECT_EQ(ucp_config_modify(cfg, "WEFT_RX_SIZE", "16384"), UCS_OK);
  EXPECT_EQ(ucp_config_modify(cfg, "TLS", "foo"), UCS_OK);
  char* text = nullptr;
  size_t tlen = 0;
  FILE* f = open_memstream(&text, &tlen);
  ucp_config_print(cfg, f, nullptr,
                   static_cast<ucs_config_print_flags_t>(UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_DOC));
  fclose(f);
  EXPECT_NE(strstr(text, "UCX_WEFT_RX_SIZE=16384"), nullptr) << text;
  EXPECT_NE(strstr(text, "UCX_KEEPALIVE_INTERVAL=0.5s"), nullptr) << text;
  EXPECT_NE(strstr(text, "# accepted: 1024 to 1048576"), nullptr) << text;
  free(text);
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_TAG;
  ucp_context_h ctx = nullptr;
  EXPECT_EQ(ucp_init(&p, cfg, &ctx), UCS_ERR_NO_DEVICE);
  ucp_config_release(cfg);
  const std::string err = testing::internal::GetCapturedStderr();
  for (const char* said :
       {"UCX_KEEPALIVE_INTERVAL=abc: not a time (accepted: a time: <number>[s|ms|us|ns|m], or inf); the "
        "default, 1s, "
        "is used",
        "UCX_WEFT_RX_SIZE=5: out of range (accepted: 1024 to 1048576); the default, 8192, is used",
        "UCX_LOG_LEVEL=loud: not a log level",
        "UCX_TLS=foo: transport 'foo' is not available, please use one or more of: all, cma",
        "ucp_init: no usable transport: UCX_TLS=foo selects none of shm, tcp"})
    EXPECT_NE(err.find(said), std::string::npos) << said << "\n" << err;
}

TEST(ucp, config_context_worker) {
  ucp_config_t* cfg = nullptr;
  ASSERT_EQ(ucp_config_read(nullptr, nullptr, &cfg), UCS_OK);
  EXPECT_EQ(ucp_config_modify(cfg, "TLS", "shm"), UCS_OK);
  EXPECT_EQ(ucp_config_modify(cfg, "SOME_OTHER", "x"), UCS_OK);
  EXPECT_EQ(ucp_config_modify(cfg, nullptr, "x"), UCS_ERR_INVALID_PARAM);
  char* text = nullptr;
  size_t tlen = 0;
  FILE* f = open_memstream(&text, &tlen);
  ucp_config_print(cfg, f, "title", UCS_CONFIG_PRINT_CONFIG);
  fclose(f);
  EXPECT_NE(strstr(text, "UCX_TLS=shm"), nullptr) << text;
  free(text);
  ucp_params_t p{};
  ucp_context_h ctx = nullptr;
  EXPECT_EQ(ucp_init(&p, cfg, &ctx), UCS_ERR_INVALID_PARAM);  // no features
  EXPECT_EQ(ucp_init(nullptr, cfg, &ctx), UCS_ERR_INVALID_PARAM);
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = all_features;
  ASSERT_EQ(ucp_init(&p, cfg, &ctx), UCS_OK);
  ucp_config_release(cfg);
  ucp_context_attr_t ca{};
  ca.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE | UCP_ATTR_FIELD_THREAD_MODE | UCP_ATTR_FIELD_NAME;
  EXPECT_EQ(ucp_context_query(ctx, &ca), UCS_OK);
  EXPECT_GT(ca.request_size, 0u);
  f = open_memstream(&text, &tlen);
  ucp_context_print_info(ctx, f);
  fclose(f);
  EXPECT_NE(strstr(text, "# resource 0  :  md 0  dev 0  flags -- shm/memory"), nullptr) << text;
  free(text);
  ucp_worker_params_t wp{};
  ucp_worker_h w = nullptr;
  ASSERT_EQ(ucp_worker_create(ctx, &wp, &w), UCS_OK);
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE | UCP_WORKER_ATTR_FIELD_ADDRESS |
                  UCP_WORKER_ATTR_FIELD_NAME | UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  ASSERT_EQ(ucp_worker_query(w, &wa), UCS_OK);
  EXPECT_EQ(wa.thread_mode, UCS_THREAD_MODE_SINGLE);
  EXPECT_GT(wa.address_length, 0u);
  EXPECT_GT(wa.max_am_header, 64u);
  ucp_worker_address_attr_t aa{};
  aa.field_mask = UCP_WORKER_ADDRESS_ATTR_FIELD_UID;
  EXPECT_EQ(ucp_worker_address_query(wa.address, &aa), UCS_OK);
  EXPECT_NE(aa.worker_uid, 0u);
  char junk[64] = {};
  EXPECT_EQ(ucp_worker_address_query(reinterpret_cast<ucp_address_t*>(junk), &aa), UCS_ERR_INVALID_PARAM);
  ucp_worker_release_address(w, wa.address);
  f = open_memstream(&text, &tlen);
  ucp_worker_print_info(w, f);
  fclose(f);
  EXPECT_NE(strstr(text, "transport"), nullptr);
  free(text);
  // Bad input gets an error, never a crash.
  ucp_ep_h ep = nullptr;
  ucp_ep_params_t ep_p{};
  EXPECT_EQ(ucp_ep_create(w, &ep_p, &ep), UCS_ERR_INVALID_PARAM);
  ep_p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep_p.address = reinterpret_cast<ucp_address_t*>(junk);
  EXPECT_EQ(ucp_ep_create(w, &ep_p, &ep), UCS_ERR_INVALID_ADDR);
  EXPECT_TRUE(UCS_PTR_IS_ERR(ucp_tag_send_nbx(nullptr, junk, 1, 0, nullptr)));
  EXPECT_TRUE(UCS_PTR_IS_ERR(ucp_tag_recv_nbx(nullptr, junk, 1, 0, 0, nullptr)));
  EXPECT_EQ(ucp_request_check_status(nullptr), UCS_ERR_INVALID_PARAM);
  ucp_request_free(nullptr);
  ucp_rkey_h rk = nullptr;
  EXPECT_EQ(ucp_ep_rkey_unpack(nullptr, junk, &rk), UCS_ERR_INVALID_PARAM);
  ucp_mem_map_params_t mp{};
  ucp_mem_h mh = nullptr;
  EXPECT_EQ(ucp_mem_map(ctx, &mp, &mh), UCS_ERR_INVALID_PARAM);  // no length
  EXPECT_EQ(ucp_worker_set_am_recv_handler(w, nullptr), UCS_ERR_INVALID_PARAM);
  ucp_lib_attr_t la{};
  la.field_mask = UCP_LIB_ATTR_FIELD_MAX_THREAD_LEVEL;
  EXPECT_EQ(ucp_lib_query(&la), UCS_OK);
  unsigned maj = 0, min = 0, rel = 0;
  ucp_get_version(&maj, &min, &rel);
  EXPECT_EQ(maj, 1u);
  EXPECT_STREQ(ucs_status_string(UCS_ERR_CANCELED), "Request canceled");
  EXPECT_EQ(ucp_worker_progress(w), 0u);
  ucp_worker_destroy(w);
  ucp_cleanup(ctx);
}

// ---------------------------------------------------------------- tag
TEST(ucp, tag_sizes_data_checked) {
  two([](side& s) {
    s.init();
    s.connect();
    static const size_t sizes[] = {0, 1, 8, 16, 17, 63, 4096, 4097, 65536, 262145, 1 << 20, 16 << 20};
    std::vector<uint8_t> buf((16 << 20) + 64);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t n = sizes[k];
      for (int dir = 0; dir < 2; dir++) {
        bool sender = s.rank == dir;
        if (sender) {
          fill(buf.data(), n, static_cast<int>(k));
          ucp_request_param_t p = send_param();
          CK(s.wait(ucp_tag_send_nbx(s.ep, buf.data(), n, 0x100 + k, &p)) == UCS_OK);
        } else {
          memset(buf.data(), 0xee, n + 64);
          ucp_request_param_t p = recv_param();
          void* r = ucp_tag_recv_nbx(s.w, buf.data(), n + 64, 0x100 + k, ~0ull, &p);
          CK(UCS_PTR_IS_PTR(r));
          auto* a = static_cast<app_req*>(r);
          CK(s.wait(r) == UCS_OK);
          CK(a->length == n && a->tag == 0x100 + k);
          CK(same(buf.data(), n, static_cast<int>(k)));
          CK(buf[n] == 0xee && buf[n + 63] == 0xee);
        }
      }
    }
    s.barrier();
    s.fini();
  });
}

TEST(ucp, tag_mask_order_truncation) {
  two([](side& s) {
    s.init();
    s.connect();
    enum { N = 300 };
    if (s.rank == 0) {
      for (uint32_t i = 0; i < N; i++) {
        ucp_request_param_t p = send_param();
        CK(s.wait(ucp_tag_send_nbx(s.ep, &i, sizeof i, 0xabc00000ull | (i & 0xff), &p)) == UCS_OK);
      }
      std::vector<char> big(10000, 'x');
      ucp_request_param_t p = send_param();
      CK(s.wait(ucp_tag_send_nbx(s.ep, big.data(), big.size(), 77, &p)) == UCS_OK);
    } else {
      // a receive that ignores the low byte gets them in order
      for (uint32_t i = 0; i < N; i++) {
        uint32_t v = ~0u;
        ucp_request_param_t p = recv_param();
        void* r = ucp_tag_recv_nbx(s.w, &v, sizeof v, 0xabc00000ull, ~0xffull, &p);
        auto* a = static_cast<app_req*>(r);
        CK(s.wait(r) == UCS_OK);
        if (v != i) fprintf(stderr, "message %u: got %u tag %llx\n", i, v, (unsigned long long)a->tag);
        CK(v == i && a->tag == (0xabc00000ull | (i & 0xff)));
      }
      char small[100];
      ucp_request_param_t p = recv_param();
      void* r = ucp_tag_recv_nbx(s.w, small, sizeof small, 77, ~0ull, &p);
      CK(s.wait(r) == UCS_ERR_MESSAGE_TRUNCATED);
    }
    s.barrier();
    s.fini();
  });
}

TEST(ucp, tag_sync_send_and_cancel) {
  two([](side& s) {
    s.init();
    s.connect();
    if (s.rank == 0) {
      // A synchronous send completes only once the receiver matched it.
      uint64_t v = 4242;
      ucp_request_param_t p = send_param();
      void* r = ucp_tag_send_sync_nbx(s.ep, &v, sizeof v, 5, &p);
      CK(UCS_PTR_IS_PTR(r));
      double t0 = now();
      while (now() - t0 < 0.3) s.progress();
      CK(ucp_request_check_status(r) == UCS_INPROGRESS);
      char go = 1;
      s.put(&go, 1);  // the peer posts its receive now
      CK(s.wait(r) == UCS_OK);
      // large synchronous send, old API
      std::vector<uint8_t> big(300000);
      fill(big.data(), big.size(), 9);
      CK(s.wait(ucp_tag_send_sync_nb(s.ep, big.data(), big.size(), ucp_dt_make_contig(1), 6, nullptr)) ==
         UCS_OK);
      // nbr: the request lives in our memory, after UCP's part
      ucp_context_attr_t ca{};
      ca.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE;
      CK(ucp_context_query(s.ctx, &ca) == UCS_OK);
      std::vector<char> mem(ca.request_size + sizeof(app_req) + 64);
      void* req = mem.data() + ca.request_size;
      fill(big.data(), 5000, 10);
      ucs_status_t st = ucp_tag_send_nbr(s.ep, big.data(), 5000, ucp_dt_make_contig(1), 8, req);
      CK(st == UCS_OK || st == UCS_INPROGRESS);
      t0 = now();
      while (st == UCS_INPROGRESS && ucp_request_check_status(req) == UCS_INPROGRESS && now() - t0 < 10)
        s.progress();
      CK(st == UCS_OK || ucp_request_check_status(req) == UCS_OK);
      s.barrier();
    } else {
      char go;
      CK(s.get(&go, 1));
      uint64_t v = 0;
      ucp_request_param_t p = recv_param();
      CK(s.wait(ucp_tag_recv_nbx(s.w, &v, sizeof v, 5, ~0ull, &p)) == UCS_OK);
      CK(v == 4242);
      std::vector<uint8_t> big(300000);
      CK(s.wait(ucp_tag_recv_nb(s.w, big.data(), big.size(), ucp_dt_make_contig(1), 6, ~0ull, nullptr)) ==
         UCS_OK);
      CK(same(big.data(), big.size(), 9));
      std::vector<uint8_t> b2(5000);
      CK(s.wait(ucp_tag_recv_nb(s.w, b2.data(), b2.size(), ucp_dt_make_contig(1), 8, ~0ull, nullptr)) ==
         UCS_OK);
      CK(same(b2.data(), 5000, 10));
      // a posted receive nobody sends to is cancelled
      uint64_t never;
      void* r = ucp_tag_recv_nbx(s.w, &never, sizeof never, 0xdead, ~0ull, &p);
      CK(UCS_PTR_IS_PTR(r));
      ucp_request_cancel(s.w, r);
      CK(s.wait(r) == UCS_ERR_CANCELED);
      ucp_context_attr_t ca{};
      ca.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE;
      CK(ucp_context_query(s.ctx, &ca) == UCS_OK);
      std::vector<char> mem(ca.request_size + sizeof(app_req) + 64);
      void* req = mem.data() + ca.request_size;
      CK(ucp_tag_recv_nbr(s.w, &never, sizeof never, ucp_dt_make_contig(1), 0xbeef, ~0ull, req) == UCS_OK);
      ucp_request_cancel(s.w, req);
      double t1 = now();
      while (ucp_request_check_status(req) == UCS_INPROGRESS && now() - t1 < 10) s.progress();
      CK(ucp_request_check_status(req) == UCS_ERR_CANCELED);
      s.barrier();
    }
    s.fini();
  });
}

TEST(ucp, tag_probe_and_message_receive) {
  two([](side& s) {
    s.init();
    s.connect();
    if (s.rank == 0) {
      uint32_t x = 99;
      CK(s.wait(ucp_tag_send_nb(s.ep, &x, 1, ucp_dt_make_contig(4), 7, nullptr)) == UCS_OK);
      std::vector<uint8_t> big(300000);
      fill(big.data(), big.size(), 10);
      CK(s.wait(ucp_tag_send_sync_nbx(s.ep, big.data(), big.size(), 8, nullptr)) == UCS_OK);
      s.barrier();
    } else {
      // probe without removing, then with: the message stays for msg_recv
      ucp_tag_recv_info_t info{};
      ucp_tag_message_h m = nullptr;
      double t0 = now();
      while (!(m = ucp_tag_probe_nb(s.w, 7, ~0ull, 0, &info)) && now() - t0 < 10) s.progress();
      CK(m && info.length == 4);
      m = ucp_tag_probe_nb(s.w, 7, ~0ull, 1, &info);
      CK(m != nullptr);
      CK(ucp_tag_probe_nb(s.w, 7, ~0ull, 0, &info) == nullptr);  // claimed
      uint32_t x = 0;
      ucp_request_param_t rp = recv_param();
      CK(s.wait(ucp_tag_msg_recv_nbx(s.w, &x, sizeof x, m, &rp)) == UCS_OK);
      CK(x == 99);
      // a large synchronous message, probed with a mask, received by handle
      t0 = now();
      while (!(m = ucp_tag_probe_nb(s.w, 0, ~0xfull, 1, &info)) && now() - t0 < 10) s.progress();
      CK(m && info.length == 300000 && info.sender_tag == 8);
      std::vector<uint8_t> b2(300000);
      CK(s.wait(ucp_tag_msg_recv_nb(s.w, b2.data(), b2.size(), ucp_dt_make_contig(1), m, nullptr)) == UCS_OK);
      CK(same(b2.data(), b2.size(), 10));
      CK(ucp_tag_probe_nb(s.w, 12345, ~0ull, 1, &info) == nullptr);
      CK(UCS_PTR_IS_ERR(ucp_tag_msg_recv_nbx(s.w, &x, sizeof x, nullptr, &rp)));
      s.barrier();
    }
    s.fini();
  });
}

// A strided generic datatype: every 3rd byte of the buffer. It counts its
// states: each operation takes exactly one (start ... finish).
struct strided {
  static std::atomic<int> open;
  struct st {
    uint8_t* buf;
    size_t count;
  };
  static void* start_pack(void*, const void* b, size_t count) {
    open++;
    return new st{const_cast<uint8_t*>(static_cast<const uint8_t*>(b)), count};
  }
  static void* start_unpack(void*, void* b, size_t count) {
    open++;
    return new st{static_cast<uint8_t*>(b), count};
  }
  static size_t packed_size(void* s) { return static_cast<st*>(s)->count; }
  static size_t pack(void* s, size_t off, void* dst, size_t max) {
    auto* x = static_cast<st*>(s);
    size_t n = std::min(max, x->count - off);
    for (size_t i = 0; i < n; i++) static_cast<uint8_t*>(dst)[i] = x->buf[(off + i) * 3];
    return n;
  }
  static ucs_status_t unpack(void* s, size_t off, const void* src, size_t len) {
    auto* x = static_cast<st*>(s);
    if (off + len > x->count) return UCS_ERR_MESSAGE_TRUNCATED;
    for (size_t i = 0; i < len; i++) x->buf[(off + i) * 3] = static_cast<const uint8_t*>(src)[i];
    return UCS_OK;
  }
  static void finish(void* s) {
    open--;
    delete static_cast<st*>(s);
  }
};
std::atomic<int> strided::open{0};

TEST(ucp, tag_iov_and_generic_datatypes) {
  two([](side& s) {
    s.init();
    s.connect();
    ucp_generic_dt_ops_t ops{strided::start_pack, strided::start_unpack, strided::packed_size,
                             strided::pack,       strided::unpack,       strided::finish};
    ucp_datatype_t gdt;
    CK(ucp_dt_create_generic(&ops, nullptr, &gdt) == UCS_OK);
    enum { NIOV = 6, PIECE = 1000, G = 70000 };
    std::vector<uint8_t> a(NIOV * PIECE), g(3 * G);
    ucp_dt_iov_t iov[NIOV];
    for (int i = 0; i < NIOV; i++) iov[i] = {a.data() + (NIOV - 1 - i) * PIECE, PIECE};  // reversed pieces
    if (s.rank == 0) {
      std::vector<uint8_t> flat(NIOV * PIECE);
      fill(flat.data(), flat.size(), 3);
      for (int i = 0; i < NIOV; i++) memcpy(iov[i].buffer, flat.data() + i * PIECE, PIECE);
      ucp_request_param_t p = send_param();
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      p.datatype = ucp_dt_make_iov();
      CK(s.wait(ucp_tag_send_nbx(s.ep, iov, NIOV, 1, &p)) == UCS_OK);
      for (size_t i = 0; i < G; i++) g[i * 3] = pat(i, 4);
      p.datatype = gdt;
      CK(s.wait(ucp_tag_send_nbx(s.ep, g.data(), G, 2, &p)) == UCS_OK);
      // and a contiguous message into the other side's IOV receive
      std::vector<uint8_t> c(NIOV * PIECE);
      fill(c.data(), c.size(), 5);
      ucp_request_param_t q = send_param();
      CK(s.wait(ucp_tag_send_nbx(s.ep, c.data(), c.size(), 3, &q)) == UCS_OK);
    } else {
      std::vector<uint8_t> flat(NIOV * PIECE);
      ucp_request_param_t p = recv_param();
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      p.datatype = ucp_dt_make_iov();
      ucp_dt_iov_t riov[2] = {{flat.data(), 2500}, {flat.data() + 2500, flat.size() - 2500}};
      CK(s.wait(ucp_tag_recv_nbx(s.w, riov, 2, 1, ~0ull, &p)) == UCS_OK);
      CK(same(flat.data(), flat.size(), 3));
      p.datatype = gdt;
      CK(s.wait(ucp_tag_recv_nbx(s.w, g.data(), G, 2, ~0ull, &p)) == UCS_OK);
      bool ok = true;
      for (size_t i = 0; i < G; i++) ok &= g[i * 3] == pat(i, 4) && g[i * 3 + 1] == 0 && g[i * 3 + 2] == 0;
      CK(ok);
      p.datatype = ucp_dt_make_iov();
      CK(s.wait(ucp_tag_recv_nbx(s.w, iov, NIOV, 3, ~0ull, &p)) == UCS_OK);
      ok = true;
      for (int i = 0; i < NIOV; i++) ok &= same(iov[i].buffer, 0, 5);
      std::vector<uint8_t> back(NIOV * PIECE);
      for (int i = 0; i < NIOV; i++) memcpy(back.data() + i * PIECE, iov[i].buffer, PIECE);
      CK(same(back.data(), back.size(), 5));
    }
    CK(strided::open == 0);
    s.barrier();
    ucp_dt_destroy(gdt);
    s.fini();
  });
}

// The hot paths of ucp_tag_send_nbx, ucp_tag_recv_nbx, ucp_worker_progress
// and ucp_request_free (no callback, no datatype or a contiguous one):
// data lands, the sender's tag and length are reported, a receive freed
// before its message arrives still receives and goes back to the pool, and
// the pool stays bounded over thousands of messages.
TEST(ucp, tag_fast_paths) {
  two([](side& s) {
    g_req_inits = 0;
    s.init();
    s.connect();
    constexpr int rounds = 3000;
    if (s.rank == 0) {
      for (int i = 0; i < rounds; i++) {
        if (i % 100 == 0) s.barrier();  // the peer posted the receives of the next hundred
        uint64_t v[2] = {0x1234000000000000ull + static_cast<uint64_t>(i), ~static_cast<uint64_t>(i)};
        CK(s.wait(ucp_tag_send_nbx(s.ep, v, sizeof v, 0x500 + (i & 1), nullptr)) == UCS_OK);
      }
      s.barrier();
    } else {
      uint64_t in[100][2];
      int freed_early = 0;
      for (int b = 0; b < rounds / 100; b++) {
        void* r[100];
        memset(in, 0, sizeof in);
        for (int j = 0; j < 100; j++) {
          ucp_request_param_t p{};
          if (j % 3 == 2) {  // a contiguous datatype of 8-byte elements, 2 of them
            p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
            p.datatype = ucp_dt_make_contig(8);
          }
          const int i = b * 100 + j;
          r[j] = ucp_tag_recv_nbx(s.w, in[j], p.op_attr_mask ? 2 : sizeof in[j], 0x500 + (i & 1), ~0ull, &p);
          CK(UCS_PTR_IS_PTR(r[j]));
          if (j % 10 == 5) {  // freed before its message arrives: it still receives
            ucp_request_free(r[j]);
            r[j] = nullptr;
            freed_early++;
          }
        }
        s.barrier();
        for (int j = 0; j < 100; j++) {
          if (!r[j]) continue;
          ucp_tag_recv_info_t info{};
          double t0 = now();
          while (ucp_request_test(r[j], &info) == UCS_INPROGRESS && now() - t0 < 10) s.progress();
          CK(ucp_request_check_status(r[j]) == UCS_OK);
          CK(info.length == 16 && info.sender_tag == 0x500u + ((b * 100 + j) & 1));
          ucp_request_free(r[j]);
        }
        // the early-freed ones: their data is there once everything after them arrived
        for (int j = 0; j < 100; j++) {
          const uint64_t i = static_cast<uint64_t>(b * 100 + j);
          CK(in[j][0] == 0x1234000000000000ull + i && in[j][1] == ~i);
        }
      }
      CK(freed_early == rounds / 10);
      s.barrier();
    }
    // every receive request went back to the pool: one chunk serves them all
    if (s.rank == 1) CK(g_req_inits > 0 && g_req_inits <= 256);
    s.fini();
  });
}

TEST(ucp, requests_user_memory_and_init) {
  two([](side& s) {
    g_req_inits = 0;
    s.init();
    s.connect();
    if (s.rank == 0) {
      // Requests come from a pool: request_init runs once per request object.
      for (int i = 0; i < 200; i++) {
        std::vector<char> b(5000, static_cast<char>(i));
        ucp_request_param_t p = send_param();
        void* r = ucp_tag_send_nbx(s.ep, b.data(), b.size(), 9, &p);
        if (UCS_PTR_IS_PTR(r)) CK(static_cast<app_req*>(r)->magic == 0xfeedf00d);
        CK(s.wait(r) == UCS_OK);
      }
      CK(g_req_inits > 0 && g_req_inits <= 128);
      // NO_IMM_CMPL: a request even for an inline send
      uint8_t one = 1;
      ucp_request_param_t p = send_param();
      p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      void* r = ucp_tag_send_nbx(s.ep, &one, 1, 10, &p);
      CK(UCS_PTR_IS_PTR(r));
      CK(s.wait(r) == UCS_OK);
      // OP_ATTR_FIELD_REQUEST: UCP's part before the pointer we hand in
      ucp_context_attr_t ca{};
      ca.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE;
      CK(ucp_context_query(s.ctx, &ca) == UCS_OK);
      std::vector<char> mem(ca.request_size + sizeof(app_req));
      auto* mine = reinterpret_cast<app_req*>(mem.data() + ca.request_size);
      mine->done = 0;
      std::vector<char> b(100000, 'q');
      ucp_request_param_t q = send_param();
      q.op_attr_mask |= UCP_OP_ATTR_FIELD_REQUEST;
      q.request = mine;
      r = ucp_tag_send_nbx(s.ep, b.data(), b.size(), 11, &q);
      CK(r == mine || r == nullptr);
      double t0 = now();
      while (r && !mine->done && now() - t0 < 10) s.progress();
      CK(!r || (mine->done && mine->status == UCS_OK));
      // Freed before completion: it completes anyway, no callback after free.
      b.assign(1 << 20, 'z');
      p = send_param();
      r = ucp_tag_send_nbx(s.ep, b.data(), b.size(), 12, &p);
      auto* a = static_cast<app_req*>(r);
      if (UCS_PTR_IS_PTR(r)) {
        a->done = 0;
        ucp_request_free(r);
      }
      s.barrier();
      s.barrier();
    } else {
      std::vector<char> b(1 << 20);
      for (int i = 0; i < 200; i++)
        CK(s.wait(ucp_tag_recv_nbx(s.w, b.data(), 5000, 9, ~0ull, nullptr)) == UCS_OK);
      CK(s.wait(ucp_tag_recv_nbx(s.w, b.data(), 1, 10, ~0ull, nullptr)) == UCS_OK);
      CK(s.wait(ucp_tag_recv_nbx(s.w, b.data(), 100000, 11, ~0ull, nullptr)) == UCS_OK);
      CK(b[99999] == 'q');
      s.barrier();
      CK(s.wait(ucp_tag_recv_nbx(s.w, b.data(), b.size(), 12, ~0ull, nullptr)) == UCS_OK);
      CK(b[(1 << 20) - 1] == 'z');
      s.barrier();
    }
    s.fini();
  });
}

// ---------------------------------------------------------------- active messages
struct am_state {
  int calls = 0;
  std::vector<uint8_t> header, data;
  void* keep = nullptr;
  void* desc = nullptr;
  size_t rlen = 0;
  bool rndv = false;
  ucp_ep_h reply = nullptr;
  int mode = 0;  // 0 copy, 1 keep (INPROGRESS), 2 rendezvous left alone
};
ucs_status_t am_cb(void* arg, const void* h, size_t hl, void* d, size_t l, const ucp_am_recv_param_t* p) {
  auto* st = static_cast<am_state*>(arg);
  st->calls++;
  st->header.assign(static_cast<const uint8_t*>(h), static_cast<const uint8_t*>(h) + hl);
  st->reply = (p->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? p->reply_ep : nullptr;
  st->rndv = p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
  st->rlen = l;
  if (st->rndv) {
    st->desc = d;
    return st->mode == 2 ? UCS_OK : UCS_INPROGRESS;
  }
  if (st->mode == 1 && (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA)) {
    st->keep = d;
    return UCS_INPROGRESS;
  }
  st->data.assign(static_cast<uint8_t*>(d), static_cast<uint8_t*>(d) + l);
  return UCS_OK;
}
ucs_status_t am_old_cb(void* arg, void* d, size_t l, ucp_ep_h reply, unsigned flags) {
  auto* st = static_cast<am_state*>(arg);
  st->calls++;
  st->reply = reply;
  CK(flags & UCP_CB_PARAM_FLAG_DATA);
  st->data.assign(static_cast<uint8_t*>(d), static_cast<uint8_t*>(d) + l);
  return UCS_OK;
}
void am_data_cb(void* r, ucs_status_t st, size_t len, void*) {
  auto* a = static_cast<app_req*>(r);
  a->done = 1;
  a->status = st;
  a->length = len;
}

TEST(ucp, active_messages) {
  two([](side& s) {
    s.init();
    s.connect();
    am_state st;
    ucp_am_handler_param_t hp{};
    hp.field_mask =
        UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = 17;
    hp.cb = am_cb;
    hp.arg = &st;
    CK(ucp_worker_set_am_recv_handler(s.w, &hp) == UCS_OK);
    CK(ucp_worker_set_am_handler(s.w, 18, am_old_cb, &st, UCP_AM_FLAG_WHOLE_MSG) == UCS_OK);
    s.barrier();
    auto wait_calls = [&](int n) {
      double t0 = now();
      while (st.calls < n && now() - t0 < 20) s.progress();
      CK(st.calls >= n);
    };
    const char hdr[] = "header!";
    // One message at a time: the receiver says when it is ready for the next.
    auto next = [&] {
      char c;
      CK(s.get(&c, 1));
    };
    auto ready = [&] {
      char c = 1;
      s.put(&c, 1);
    };
    if (s.rank == 0) {
      std::vector<uint8_t> d(1 << 20);
      fill(d.data(), d.size(), 21);
      ucp_request_param_t p = send_param();
      // 1: eager, header and data, with REPLY
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_AM_SEND_FLAG_REPLY;
      next();
      CK(s.wait(ucp_am_send_nbx(s.ep, 17, hdr, sizeof hdr, d.data(), 3000, &p)) == UCS_OK);
      // 2: eager (UCP_AM_SEND_FLAG_EAGER), kept by the handler
      p.flags = UCP_AM_SEND_FLAG_EAGER;
      next();
      CK(s.wait(ucp_am_send_nbx(s.ep, 17, hdr, sizeof hdr, d.data(), 1000, &p)) == UCS_OK);
      // 3: rendezvous (1 MiB), received with recv_data_nbx
      p.flags = 0;
      next();
      CK(s.wait(ucp_am_send_nbx(s.ep, 17, nullptr, 0, d.data(), d.size(), &p)) == UCS_OK);
      // 4: rendezvous forced for a small message, left alone by the handler
      p.flags = UCP_AM_SEND_FLAG_RNDV;
      next();
      CK(s.wait(ucp_am_send_nbx(s.ep, 17, hdr, 3, d.data(), 100, &p)) == UCS_OK);
      // 5, 6: old API, small and large, with REPLY
      next();
      CK(s.wait(ucp_am_send_nb(s.ep, 18, d.data(), 500, ucp_dt_make_contig(1), nullptr, UCP_AM_SEND_REPLY)) ==
         UCS_OK);
      CK(s.wait(ucp_am_send_nb(s.ep, 18, d.data(), 100000, ucp_dt_make_contig(1), nullptr, 0)) == UCS_OK);
      // the reply comes back on our handler
      wait_calls(1);
      CK(st.data.size() == 4 && memcmp(st.data.data(), "pong", 4) == 0);
      s.barrier();
    } else {
      ready();
      wait_calls(1);
      CK(st.header.size() == sizeof hdr && !memcmp(st.header.data(), hdr, sizeof hdr));
      CK(st.data.size() == 3000 && same(st.data.data(), 3000, 21) && st.reply != nullptr && !st.rndv);
      st.mode = 1;
      ready();
      wait_calls(2);
      CK(st.keep && st.rlen == 1000 && same(st.keep, 1000, 21));
      ucp_am_data_release(s.w, st.keep);
      st.mode = 0;
      ready();
      wait_calls(3);
      CK(st.rndv && st.rlen == (1 << 20) && st.desc);
      std::vector<uint8_t> big(1 << 20);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
      p.cb.recv_am = am_data_cb;
      void* r = ucp_am_recv_data_nbx(s.w, st.desc, big.data(), big.size(), &p);
      CK(s.wait(r) == UCS_OK);
      CK(same(big.data(), big.size(), 21));
      st.mode = 2;
      ready();
      wait_calls(4);
      CK(st.rndv && st.rlen == 100);
      st.mode = 0;
      ready();
      wait_calls(6);
      CK(st.data.size() == 100000 && same(st.data.data(), 100000, 21));
      // reply on the endpoint the first message gave us (old handler's reply ep came with #5)
      CK(st.reply == nullptr);
      ucp_request_param_t q = send_param();
      ucp_ep_h reply_ep = s.ep;
      CK(s.wait(ucp_am_send_nbx(reply_ep, 17, nullptr, 0, "pong", 4, &q)) == UCS_OK);
      s.barrier();
    }
    s.fini();
  });
}

// MPICH's ch4:ucx drives the old AM API this way (MPI one-sided operations
// of any size travel as one active message): each message is a header buffer
// and the user's data as a two-entry IOV, sent with ucp_am_send_nb and a
// callback, whose request is handed back at once with ucp_request_release;
// the callback frees the header buffer and completes the operation. The
// target's handler (UCP_AM_FLAG_WHOLE_MSG) copies the message, checks it and
// replies from inside the handler with a small ucp_am_send_nb of its own,
// whose callback releases its request. ucp_request_release, unlike
// ucp_request_free, keeps the callback: a face that dropped it left every
// message past the eager size without its completion, and MPI_Win_fence
// waiting for it forever. The handler sees the messages in the order they
// were sent, whatever their sizes, as MPICH's accumulates need (rma's
// large_small_acc: a 64 KiB MPI_REPLACE, then 8 and 16 bytes over its
// start, must leave the small ones' values).
struct mpich_am {
  ucp_worker_h w = nullptr;
  ucp_ep_h ep = nullptr;
  int received = 0, acks = 0, bad = 0, out_of_order = 0;
};
mpich_am g_mpich_am;
int g_mpich_sends_done = 0, g_mpich_acks_sent = 0, g_mpich_bad_status = 0;

struct mpich_hdr {
  uint32_t kind;  // 1 data, 2 ack
  uint32_t seq;
  uint64_t data_sz;
};

void mpich_data_sent(void* r, ucs_status_t st) {
  // the request's application part carries the header buffer to free
  auto* a = static_cast<app_req*>(r);
  if (st != UCS_OK) g_mpich_bad_status++;
  free(reinterpret_cast<void*>(a->tag));
  a->tag = 0;
  g_mpich_sends_done++;
}
void mpich_ack_sent(void* r, ucs_status_t st) {
  if (st != UCS_OK) g_mpich_bad_status++;
  g_mpich_acks_sent++;
  ucp_request_release(r);  // inside the callback, as MPICH does
}
void mpich_post_ack(uint32_t seq) {
  mpich_hdr ack{2, seq, 0};
  void* r = ucp_am_send_nb(g_mpich_am.ep, 9, &ack, sizeof ack, ucp_dt_make_contig(1), mpich_ack_sent, 0);
  if (UCS_PTR_IS_ERR(r))
    g_mpich_bad_status++;
  else if (!r)
    g_mpich_acks_sent++;  // done at once: no callback comes
}
ucs_status_t mpich_am_handler(void*, void* data, size_t length, ucp_ep_h, unsigned) {
  // copied first, as MPICH's handler does (the data may be unaligned)
  std::vector<uint8_t> copy(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + length);
  mpich_hdr h;
  if (length < sizeof h) {
    g_mpich_am.bad++;
    return UCS_OK;
  }
  memcpy(&h, copy.data(), sizeof h);
  if (h.kind == 2) {
    g_mpich_am.acks++;
    return UCS_OK;
  }
  if (h.kind != 1 || length != sizeof h + h.data_sz || !same(copy.data() + sizeof h, h.data_sz, int(h.seq)))
    g_mpich_am.bad++;
  if (h.seq != static_cast<uint32_t>(g_mpich_am.received)) g_mpich_am.out_of_order++;
  g_mpich_am.received++;
  mpich_post_ack(h.seq);  // a reply from inside the handler
  return UCS_OK;
}

TEST(ucp, am_old_api_released_requests_as_mpich_drives_it) {
  two([](side& s) {
    s.init();
    s.connect();
    g_mpich_am = {s.w, s.ep};
    CK(ucp_worker_set_am_handler(s.w, 9, mpich_am_handler, nullptr, UCP_AM_FLAG_WHOLE_MSG) == UCS_OK);
    s.barrier();
    // eager, around the face's frame size (8 KiB), MPICH's eager limit
    // (16 KiB), a transpose's 40 KB and 4 MB
    const std::vector<size_t> sizes = {0, 100, 8100, 8192, 16384, 40000, 4000000, 40000, 100, 65536, 8, 16, 0};
    const int total = static_cast<int>(sizes.size());
    if (s.rank == 0) {
      std::vector<std::vector<uint8_t>> data;
      for (int i = 0; i < total; i++) {
        data.emplace_back(sizes[i] + 1);
        fill(data.back().data(), sizes[i], i);
      }
      // all in flight at once, each request released as soon as it is
      // posted; the IOV stays valid until its send completes (MPICH keeps
      // it in its own request)
      std::vector<std::array<ucp_dt_iov_t, 2>> iovs(sizes.size());
      for (int i = 0; i < total; i++) {
        auto* h = static_cast<mpich_hdr*>(malloc(sizeof(mpich_hdr)));
        *h = {1, static_cast<uint32_t>(i), sizes[i]};
        iovs[i] = {{{h, sizeof *h}, {data[i].data(), sizes[i]}}};
        void* r = ucp_am_send_nb(s.ep, 9, iovs[i].data(), 2, ucp_dt_make_iov(), mpich_data_sent, 0);
        CK(!UCS_PTR_IS_ERR(r));
        if (UCS_PTR_IS_PTR(r)) {
          static_cast<app_req*>(r)->tag = reinterpret_cast<uintptr_t>(h);
          ucp_request_release(r);
        } else {
          free(h);  // done at once: no callback comes
          g_mpich_sends_done++;
        }
      }
      double t0 = now();
      while ((g_mpich_sends_done < total || g_mpich_am.acks < total) && now() - t0 < 30) s.progress();
      CK(g_mpich_sends_done == total);
      CK(g_mpich_am.acks == total);
    } else {
      double t0 = now();
      while ((g_mpich_am.received < total || g_mpich_acks_sent < total) && now() - t0 < 30) s.progress();
      CK(g_mpich_am.received == total);
      CK(g_mpich_acks_sent == total);
    }
    CK(g_mpich_am.bad == 0);
    CK(g_mpich_am.out_of_order == 0);
    CK(g_mpich_bad_status == 0);
    s.barrier();
    s.fini();
  });
}

// An old handler may keep a fetched (rendezvous) message and release it
// later; the face keeps one released buffer for the next large message. A
// kept message must stay intact while later ones arrive, and a reused
// buffer must carry only its new message.
struct kept_am {
  std::vector<std::pair<void*, size_t>> kept;
  int received = 0, bad = 0;
};
kept_am g_kept_am;

ucs_status_t keep_am_handler(void*, void* data, size_t length, ucp_ep_h, unsigned flags) {
  int seq = g_kept_am.received++;
  if (!same(data, length, seq)) g_kept_am.bad++;
  if (seq % 2 == 0 && (flags & UCP_CB_PARAM_FLAG_DATA)) {
    g_kept_am.kept.emplace_back(data, length);
    return UCS_INPROGRESS;
  }
  return UCS_OK;
}

void kept_am_sent(void*, ucs_status_t) {}  // UCX calls it when the send did not complete at once

TEST(ucp, am_old_api_kept_messages_and_buffer_reuse) {
  two([](side& s) {
    s.init();
    s.connect();
    g_kept_am = {};
    CK(ucp_worker_set_am_handler(s.w, 11, keep_am_handler, nullptr, UCP_AM_FLAG_WHOLE_MSG) == UCS_OK);
    s.barrier();
    // Even ones are kept. A released buffer serves the next message of half
    // its size up to its own: #2 and #4 land in the buffers #1 and #3 left,
    // #6 in the one the release of #4 left.
    const std::vector<size_t> sizes = {200000, 150000, 120000, 100000, 90000, 60000, 80000, 9000};
    const int total = static_cast<int>(sizes.size());
    auto send_all = [&](int from, int to) {
      for (int i = from; i < to; i++) {
        std::vector<uint8_t> d(sizes[i]);
        fill(d.data(), d.size(), i);
        CK(s.wait(ucp_am_send_nb(s.ep, 11, d.data(), d.size(), ucp_dt_make_contig(1), kept_am_sent, 0)) ==
           UCS_OK);
      }
    };
    auto receive_until = [&](int n) {
      double t0 = now();
      while (g_kept_am.received < n && now() - t0 < 30) s.progress();
      CK(g_kept_am.received == n);
    };
    if (s.rank == 0) send_all(0, 6);
    else receive_until(6);
    s.barrier();
    if (s.rank == 1) {
      // every kept message as it arrived, though later ones came after it
      CK(g_kept_am.kept.size() == 3);
      for (size_t k = 0; k < g_kept_am.kept.size(); k++) {
        CK(g_kept_am.kept[k].second == sizes[2 * k]);
        CK(same(g_kept_am.kept[k].first, g_kept_am.kept[k].second, static_cast<int>(2 * k)));
      }
      for (auto& [p, len] : g_kept_am.kept) ucp_am_data_release(s.w, p);
      g_kept_am.kept.clear();
    }
    s.barrier();
    if (s.rank == 0) send_all(6, total);
    else receive_until(total);
    s.barrier();
    if (s.rank == 1) {
      CK(g_kept_am.kept.size() == 1);
      for (auto& [p, len] : g_kept_am.kept) ucp_am_data_release(s.w, p);
    }
    CK(g_kept_am.bad == 0);
    s.barrier();
    s.fini();
  });
}

// A sender faster than its receiver: once the transport takes no more
// frames, eager sends return requests that hold the application's data
// (no copies piling up), and every message arrives intact and in order
// when the receiver catches up.
struct flood_am {
  int received = 0, bad = 0;
};
flood_am g_flood_am;

ucs_status_t flood_am_handler(void*, void* data, size_t length, ucp_ep_h, unsigned) {
  if (length != 3000 || !same(data, length, g_flood_am.received)) g_flood_am.bad++;
  g_flood_am.received++;
  return UCS_OK;
}

void flood_am_sent(void* r, ucs_status_t st) {
  auto* a = static_cast<app_req*>(r);
  a->done = 1;
  a->status = st;
}

TEST(ucp, am_sender_held_back_by_a_slow_receiver) {
  two([](side& s) {
    s.init();
    s.connect();
    g_flood_am = {};
    CK(ucp_worker_set_am_handler(s.w, 12, flood_am_handler, nullptr, UCP_AM_FLAG_WHOLE_MSG) == UCS_OK);
    s.barrier();
    const int total = 3000;
    if (s.rank == 0) {
      std::vector<std::vector<uint8_t>> data(total, std::vector<uint8_t>(3000));
      std::vector<void*> reqs;
      for (int i = 0; i < total; i++) {
        fill(data[i].data(), 3000, i);
        void* r = ucp_am_send_nb(s.ep, 12, data[i].data(), 3000, ucp_dt_make_contig(1), flood_am_sent, 0);
        CK(!UCS_PTR_IS_ERR(r));
        if (UCS_PTR_IS_PTR(r)) reqs.push_back(r);
      }
      // the receiver has not progressed: its queue is full, the rest waits
      CK(!reqs.empty());
      char go = 1;
      s.put(&go, 1);  // now it receives
      for (void* r : reqs) CK(s.wait(r) == UCS_OK);
    } else {
      char go = 0;
      CK(read(s.sock, &go, 1) == 1);  // waits without progress (barrier() would progress)
      double t0 = now();
      while (g_flood_am.received < total && now() - t0 < 30) s.progress();
      CK(g_flood_am.received == total);
      CK(g_flood_am.bad == 0);
    }
    s.barrier();
    s.fini();
  });
}

// ---------------------------------------------------------------- stream
void stream_cb(void* r, ucs_status_t st, size_t len, void*) {
  auto* a = static_cast<app_req*>(r);
  a->done = 1;
  a->status = st;
  a->length = len;
}

TEST(ucp, stream) {
  two([](side& s) {
    s.init();
    s.connect();
    enum { N = 3 << 20 };
    if (s.rank == 0) {
      std::vector<uint8_t> d(N);
      fill(d.data(), N, 31);
      ucp_request_param_t p = send_param();
      // in pieces of odd sizes, one large
      size_t off = 0;
      for (size_t piece : {size_t{1}, size_t{100}, size_t{9000}, size_t{(2 << 20)}}) {
        CK(s.wait(ucp_stream_send_nbx(s.ep, d.data() + off, piece, &p)) == UCS_OK);
        off += piece;
      }
      CK(s.wait(ucp_stream_send_nb(s.ep, d.data() + off, N - off, ucp_dt_make_contig(1), nullptr, 0)) ==
         UCS_OK);
      s.barrier();
    } else {
      std::vector<uint8_t> d(N);
      // wait until the worker reports this endpoint ready
      ucp_stream_poll_ep_t pe[4];
      double t0 = now();
      ssize_t n = 0;
      while ((n = ucp_stream_worker_poll(s.w, pe, 4, 0)) == 0 && now() - t0 < 10) s.progress();
      CK(n == 1 && pe[0].ep == s.ep && pe[0].user_data == &s);
      // zero-copy look at what is there
      size_t len = 0;
      void* z = ucp_stream_recv_data_nb(s.ep, &len);
      CK(z && !UCS_PTR_IS_ERR(z) && len >= 1);
      if (z && !UCS_PTR_IS_ERR(z)) {
        CK(same(z, len, 31));
        memcpy(d.data(), z, len);
        ucp_stream_data_release(s.ep, z);
      }
      size_t got = len;
      // a receive without WAITALL returns what is there
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
      p.cb.recv_stream = stream_cb;
      size_t l1 = 0;
      void* r = ucp_stream_recv_nbx(s.ep, d.data() + got, 50, &l1, &p);
      if (UCS_PTR_IS_PTR(r)) {
        CK(s.wait(r) == UCS_OK);
        l1 = 0;  // length comes from the request; re-read below
      }
      // the rest with WAITALL, in two receives
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
      size_t rest = N - got - l1;
      if (!l1) {
        // the non-WAITALL receive took between 1 and 50 bytes: find out how many by content
        size_t k = 1;
        while (k < 50 && d[got + k] == pat(got + k, 31) && d[got + k] != 0) k++;
        l1 = k;
        rest = N - got - l1;
      }
      got += l1;
      size_t half = rest / 2, l2 = 0, l3 = 0;
      void* r2 = ucp_stream_recv_nbx(s.ep, d.data() + got, half, &l2, &p);
      void* r3 = ucp_stream_recv_nbx(s.ep, d.data() + got + half, rest - half, &l3, &p);
      if (UCS_PTR_IS_PTR(r2)) CK(s.wait(r2) == UCS_OK);
      if (UCS_PTR_IS_PTR(r3)) CK(s.wait(r3) == UCS_OK);
      CK(same(d.data(), N, 31));
      s.barrier();
    }
    s.fini();
  });
}

// ---------------------------------------------------------------- RMA and atomics
struct remote_region {
  ucp_mem_h memh = nullptr;
  uint64_t addr = 0;
  ucp_rkey_h rkey = nullptr;
};

// Maps len bytes (allocated by UCP, or our own memory), exchanges address
// and packed key with the peer, unpacks the peer's.
remote_region share(side& s, void** local, size_t len, bool allocate) {
  ucp_mem_map_params_t mp{};
  mp.field_mask =
      UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS | UCP_MEM_MAP_PARAM_FIELD_ADDRESS;
  mp.length = len;
  if (allocate) {
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    mp.address = nullptr;
  } else {
    *local = aligned_alloc(4096, len);
    mp.address = *local;
  }
  remote_region rr;
  CK(ucp_mem_map(s.ctx, &mp, &rr.memh) == UCS_OK);
  ucp_mem_attr_t ma{};
  ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  CK(ucp_mem_query(rr.memh, &ma) == UCS_OK);
  CK(ma.length == len);
  *local = ma.address;
  void* kb = nullptr;
  size_t ks = 0;
  CK(ucp_rkey_pack(s.ctx, rr.memh, &kb, &ks) == UCS_OK);
  uint64_t a = reinterpret_cast<uintptr_t>(ma.address), n = ks;
  s.put(&a, 8);
  s.put(&n, 8);
  s.put(kb, ks);
  ucp_rkey_buffer_release(kb);
  uint64_t pa = 0, pn = 0;
  CK(s.get(&pa, 8) && s.get(&pn, 8));
  std::vector<char> pk(pn);
  CK(s.get(pk.data(), pn));
  rr.addr = pa;
  CK(ucp_ep_rkey_unpack(s.ep, pk.data(), &rr.rkey) == UCS_OK);
  return rr;
}

TEST(ucp, rma_put_get_every_form) {
  two([](side& s) {
    s.init();
    s.connect();
    enum { LEN = 4 << 20 };
    for (bool alloc : {true, false}) {
      void* local = nullptr;
      remote_region rr = share(s, &local, LEN, alloc);
      auto* mine = static_cast<uint8_t*>(local);
      memset(mine, 0, LEN);
      s.barrier();
      if (s.rank == 0) {
        std::vector<uint8_t> src(LEN);
        fill(src.data(), LEN, 41);
        ucp_request_param_t p = send_param();
        // put: nbx (large and inline-small), nbi, nb, blocking
        CK(s.wait(ucp_put_nbx(s.ep, src.data(), 1 << 20, rr.addr, rr.rkey, &p)) == UCS_OK);
        CK(s.wait(ucp_put_nbx(s.ep, src.data() + (1 << 20), 8, rr.addr + (1 << 20), rr.rkey, &p)) == UCS_OK);
        ucs_status_t st =
            ucp_put_nbi(s.ep, src.data() + (1 << 20) + 8, 1000, rr.addr + (1 << 20) + 8, rr.rkey);
        CK(st == UCS_OK || st == UCS_INPROGRESS);
        CK(s.wait(ucp_put_nb(s.ep, src.data() + (1 << 20) + 1008, 100000, rr.addr + (1 << 20) + 1008, rr.rkey,
                             nullptr)) == UCS_OK);
        CK(ucp_put(s.ep, src.data() + (1 << 20) + 101008, (2 << 20) - 101008, rr.addr + (1 << 20) + 101008,
                   rr.rkey) == UCS_OK);
        CK(ucp_put_nbi(s.ep, src.data() + (3 << 20), 1 << 20, rr.addr + (3 << 20), rr.rkey) !=
           UCS_ERR_INVALID_PARAM);
        ucp_request_param_t f{};
        CK(s.wait(ucp_ep_flush_nbx(s.ep, &f)) == UCS_OK);
        char done = 1;
        s.put(&done, 1);
        // get it all back, every form, after the peer checked
        CK(s.get(&done, 1));
        std::vector<uint8_t> back(LEN);
        CK(s.wait(ucp_get_nbx(s.ep, back.data(), 1 << 20, rr.addr, rr.rkey, &p)) == UCS_OK);
        st = ucp_get_nbi(s.ep, back.data() + (1 << 20), 1 << 20, rr.addr + (1 << 20), rr.rkey);
        CK(st == UCS_OK || st == UCS_INPROGRESS);
        CK(s.wait(ucp_get_nb(s.ep, back.data() + (2 << 20), 1 << 19, rr.addr + (2 << 20), rr.rkey,
                             nullptr)) == UCS_OK);
        CK(ucp_get(s.ep, back.data() + (5 << 19), 3 << 19, rr.addr + (5 << 19), rr.rkey) == UCS_OK);
        CK(ucp_worker_flush(s.w) == UCS_OK);
        CK(same(back.data(), LEN, 41));
        CK(ucp_ep_flush(s.ep) == UCS_OK);
        void* ptr = nullptr;
        CK(ucp_rkey_ptr(rr.rkey, rr.addr, &ptr) == UCS_ERR_UNREACHABLE);
        s.barrier();
      } else {
        char done;
        CK(s.get(&done, 1));
        CK(same(mine, LEN, 41));
        s.put(&done, 1);
        s.barrier();
      }
      ucp_rkey_destroy(rr.rkey);
      s.barrier();
      CK(ucp_mem_unmap(s.ctx, rr.memh) == UCS_OK);
      if (!alloc) free(local);
    }
    s.fini();
  });
}

// An access past the remote region is refused at the call; an operation
// without a request that fails later (the target withdrew its region) is
// reported by the next flush of its endpoint and of its worker, once: it is
// never lost silently.
TEST(ucp, rma_out_of_region_and_failed_nbi_are_reported) {
  two([](side& s) {
    s.init();
    s.connect();
    enum { LEN = 64 << 10 };
    void* local = nullptr;
    remote_region rr = share(s, &local, LEN, true);
    s.barrier();
    if (s.rank == 0) {
      std::vector<uint8_t> src(2 * LEN);
      fill(src.data(), src.size(), 43);
      ucp_request_param_t p = send_param();
      // past the end, before the start, and straddling the end
      CK(ucp_put_nbi(s.ep, src.data(), LEN + 4096, rr.addr, rr.rkey) == UCS_ERR_INVALID_PARAM);
      CK(ucp_get_nbi(s.ep, src.data(), 8, rr.addr - 8, rr.rkey) == UCS_ERR_INVALID_PARAM);
      CK(s.wait(ucp_put_nbx(s.ep, src.data(), 16, rr.addr + LEN - 8, rr.rkey, &p)) == UCS_ERR_INVALID_PARAM);
      uint64_t v = 1;
      ucp_request_param_t a{};
      a.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
      a.datatype = ucp_dt_make_contig(8);
      CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_ADD, &v, 1, rr.addr + LEN, rr.rkey, &a)) ==
         UCS_ERR_INVALID_PARAM);
      // the last byte is still in
      CK(s.wait(ucp_put_nbx(s.ep, src.data(), 8, rr.addr + LEN - 8, rr.rkey, &p)) == UCS_OK);
      CK(ucp_ep_flush(s.ep) == UCS_OK);
      char go = 1;
      s.put(&go, 1);
      CK(s.get(&go, 1));  // the peer has withdrawn its region
      ucs_status_t st = ucp_put_nbi(s.ep, src.data(), 4096, rr.addr, rr.rkey);
      CK(st == UCS_OK || st == UCS_INPROGRESS);
      ucs_status_t ep_st = ucp_ep_flush(s.ep);
      CK(ep_st != UCS_OK);
      CK(ucp_worker_flush(s.w) != UCS_OK);  // the worker's flush hears of it too
      CK(ucp_ep_flush(s.ep) == UCS_OK);     // once
      CK(ucp_worker_flush(s.w) == UCS_OK);
      s.put(&go, 1);
    } else {
      char go = 0;
      CK(s.get(&go, 1));
      CK(same(static_cast<uint8_t*>(local) + LEN - 8, 8, 43));
      CK(ucp_mem_unmap(s.ctx, rr.memh) == UCS_OK);
      rr.memh = nullptr;
      s.put(&go, 1);
      CK(s.get(&go, 1));
    }
    ucp_rkey_destroy(rr.rkey);
    s.barrier();
    if (rr.memh) CK(ucp_mem_unmap(s.ctx, rr.memh) == UCS_OK);
    s.fini();
  });
}

template <class T>
void amo_case(side& s, remote_region& rr, T* mine, int size_tag) {
  (void)size_tag;
  if (s.rank == 0) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(sizeof(T));
    T v = 5;
    // post forms (no reply buffer): add, and, or, xor on slots 0..3
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_ADD, &v, 1, rr.addr, rr.rkey, &p)) == UCS_OK);
    T m = 0x0f;
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_AND, &m, 1, rr.addr + sizeof(T), rr.rkey, &p)) == UCS_OK);
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_OR, &m, 1, rr.addr + 2 * sizeof(T), rr.rkey, &p)) ==
       UCS_OK);
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_XOR, &m, 1, rr.addr + 3 * sizeof(T), rr.rkey, &p)) ==
       UCS_OK);
    // UCP orders nothing without a fence or a flush
    CK(ucp_ep_flush(s.ep) == UCS_OK);
    // fetching forms
    ucp_request_param_t f = p;
    f.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    T res = 0;
    f.reply_buffer = &res;
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_ADD, &v, 1, rr.addr, rr.rkey, &f)) == UCS_OK);
    if (res != T(105)) fprintf(stderr, "fetch-add returned %llu\n", (unsigned long long)res);
    CK(res == T(105));
    T sw = 7;
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_SWAP, &sw, 1, rr.addr + 4 * sizeof(T), rr.rkey, &f)) ==
       UCS_OK);
    CK(res == T(400));
    T cmp = 7;
    res = 9;  // value to swap in
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_CSWAP, &cmp, 1, rr.addr + 4 * sizeof(T), rr.rkey, &f)) ==
       UCS_OK);
    CK(res == T(7));
    cmp = 1234;  // fails: the target keeps 9
    res = 11;
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_CSWAP, &cmp, 1, rr.addr + 4 * sizeof(T), rr.rkey, &f)) ==
       UCS_OK);
    CK(res == T(9));
    T fm = 0xf0;
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_AND, &fm, 1, rr.addr + 5 * sizeof(T), rr.rkey, &f)) ==
       UCS_OK);
    CK(res == T(0xff));
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_OR, &fm, 1, rr.addr + 6 * sizeof(T), rr.rkey, &f)) ==
       UCS_OK);
    CK(res == T(0x0f));
    CK(s.wait(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_XOR, &fm, 1, rr.addr + 7 * sizeof(T), rr.rkey, &f)) ==
       UCS_OK);
    CK(res == T(0xff));
    // old API
    CK(ucp_atomic_post(s.ep, UCP_ATOMIC_POST_OP_ADD, 1, sizeof(T), rr.addr + 8 * sizeof(T), rr.rkey) ==
       UCS_OK);
    CK(ucp_worker_fence(s.w) == UCS_OK);
    T r2 = 0;
    CK(s.wait(ucp_atomic_fetch_nb(s.ep, UCP_ATOMIC_FETCH_OP_FADD, 2, &r2, sizeof(T), rr.addr + 8 * sizeof(T),
                                  rr.rkey, nullptr)) == UCS_OK);
    CK(r2 == T(1));
    if (sizeof(T) == 4) {
      uint32_t o = 0;
      CK(ucp_atomic_add32(s.ep, 10, rr.addr + 9 * sizeof(T), rr.rkey) == UCS_OK);
      CK(ucp_ep_flush(s.ep) == UCS_OK);
      CK(ucp_atomic_fadd32(s.ep, 1, rr.addr + 9 * sizeof(T), rr.rkey, &o) == UCS_OK && o == 10);
      CK(ucp_atomic_swap32(s.ep, 3, rr.addr + 9 * sizeof(T), rr.rkey, &o) == UCS_OK && o == 11);
      CK(ucp_atomic_cswap32(s.ep, 3, 4, rr.addr + 9 * sizeof(T), rr.rkey, &o) == UCS_OK && o == 3);
    } else {
      uint64_t o = 0;
      CK(ucp_atomic_add64(s.ep, 10, rr.addr + 9 * sizeof(T), rr.rkey) == UCS_OK);
      CK(ucp_ep_flush(s.ep) == UCS_OK);
      CK(ucp_atomic_fadd64(s.ep, 1, rr.addr + 9 * sizeof(T), rr.rkey, &o) == UCS_OK && o == 10);
      CK(ucp_atomic_swap64(s.ep, 3, rr.addr + 9 * sizeof(T), rr.rkey, &o) == UCS_OK && o == 11);
      CK(ucp_atomic_cswap64(s.ep, 3, 4, rr.addr + 9 * sizeof(T), rr.rkey, &o) == UCS_OK && o == 3);
    }
    CK(ucp_worker_fence(s.w) == UCS_OK);
    CK(ucp_ep_flush(s.ep) == UCS_OK);
    s.barrier();
  } else {
    s.barrier();
    fprintf(stderr, "target: %llu %llu %llu %llu %llu\n", (unsigned long long)mine[0],
            (unsigned long long)mine[1], (unsigned long long)mine[2], (unsigned long long)mine[3],
            (unsigned long long)mine[4]);
    CK(mine[0] == T(110) && mine[1] == T(0x0f & 0xff) && mine[2] == T(0xff) && mine[3] == T(0xf0));
    CK(mine[4] == T(9) && mine[5] == T(0xf0) && mine[6] == T(0xff) && mine[7] == T(0x0f) && mine[8] == T(3));
    CK(mine[9] == T(4));
  }
}

TEST(ucp, atomics_32_64_every_op) {
  two([](side& s) {
    s.init();
    s.connect();
    void* local = nullptr;
    remote_region rr = share(s, &local, 4096, true);
    for (int size : {4, 8}) {
      if (size == 4) {
        auto* m = static_cast<uint32_t*>(local);
        uint32_t init[10] = {100, 0xff, 0xf0, 0xff, 400, 0xff, 0x0f, 0xff, 0, 0};
        memcpy(m, init, sizeof init);
        s.barrier();
        amo_case<uint32_t>(s, rr, m, 4);
      } else {
        auto* m = static_cast<uint64_t*>(local);
        uint64_t init[10] = {100, 0xff, 0xf0, 0xff, 400, 0xff, 0x0f, 0xff, 0, 0};
        memcpy(m, init, sizeof init);
        s.barrier();
        amo_case<uint64_t>(s, rr, m, 8);
      }
      s.barrier();
    }
    // misaligned and unsupported sizes are refused
    uint64_t v = 1;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(2);
    CK(UCS_PTR_IS_ERR(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_ADD, &v, 1, rr.addr, rr.rkey, &p)));
    p.datatype = ucp_dt_make_contig(8);
    CK(UCS_PTR_IS_ERR(ucp_atomic_op_nbx(s.ep, UCP_ATOMIC_OP_ADD, &v, 1, rr.addr + 4, rr.rkey, &p)));
    ucp_rkey_destroy(rr.rkey);
    s.barrier();
    CK(ucp_mem_unmap(s.ctx, rr.memh) == UCS_OK);
    s.fini();
  });
}

// ---------------------------------------------------------------- endpoints
TEST(ucp, ep_query_perf_print_modify) {
  two([](side& s) {
    s.init();
    s.connect();
    ucp_ep_attr_t a{};
    a.field_mask = UCP_EP_ATTR_FIELD_NAME;
    CK(ucp_ep_query(s.ep, &a) == UCS_OK && strlen(a.name) > 0);
    a.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR;
    CK(ucp_ep_query(s.ep, &a) == UCS_ERR_NOT_CONNECTED);
    // transports: an entry size smaller than the structure gets only what fits
    struct {
      const char* name;
      uint64_t guard[3];
    } small[2];
    memset(small, 0xab, sizeof small);
    a.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
    a.transports.entries = reinterpret_cast<ucp_transport_entry_t*>(small);
    a.transports.num_entries = 2;
    a.transports.entry_size = sizeof(const char*);
    CK(ucp_ep_query(s.ep, &a) == UCS_OK);
    CK(a.transports.num_entries == 1 && small[0].name && !strcmp(small[0].name, "shm"));
    CK(small[0].guard[0] == 0xabababababababab && small[1].guard[0] == 0xabababababababab);
    ucp_transport_entry_t full[4];
    a.transports.entries = full;
    a.transports.num_entries = 4;
    a.transports.entry_size = sizeof full[0];
    CK(ucp_ep_query(s.ep, &a) == UCS_OK && a.transports.num_entries == 1 &&
       !strcmp(full[0].device_name, "memory"));
    ucp_ep_evaluate_perf_param_t pp{};
    ucp_ep_evaluate_perf_attr_t pa{};
    pp.field_mask = UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE;
    pa.field_mask = UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME;
    pp.message_size = 8;
    CK(ucp_ep_evaluate_perf(s.ep, &pp, &pa) == UCS_OK);
    double t8 = pa.estimated_time;
    pp.message_size = 1 << 24;
    CK(ucp_ep_evaluate_perf(s.ep, &pp, &pa) == UCS_OK);
    CK(t8 > 0 && t8 < 1e-3 && pa.estimated_time > t8);
    pp.field_mask = 0;
    CK(ucp_ep_evaluate_perf(s.ep, &pp, &pa) == UCS_ERR_INVALID_PARAM);
    char* text = nullptr;
    size_t tl = 0;
    FILE* f = open_memstream(&text, &tl);
    ucp_ep_print_info(s.ep, f);
    fclose(f);
    CK(strstr(text, "transport: shm/memory") != nullptr && strstr(text, "rendezvous") != nullptr);
    free(text);
    ucp_ep_params_t mp{};
    mp.field_mask = UCP_EP_PARAM_FIELD_USER_DATA;
    mp.user_data = reinterpret_cast<void*>(0x1234);
    CK(ucp_ep_modify_nb(s.ep, &mp) == nullptr);
    mp.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    CK(UCS_PTR_IS_ERR(ucp_ep_modify_nb(s.ep, &mp)));
    mp.field_mask = UCP_EP_PARAM_FIELD_USER_DATA;
    mp.user_data = &s;
    CK(ucp_ep_modify_nb(s.ep, &mp) == nullptr);
    s.barrier();
    s.fini();
  });
}

// An endpoint to its own worker: what it sends it receives.
// An endpoint of a worker to itself, with endpoint flags.
ucp_ep_h ep_to_self(side& s, unsigned flags = 0) {
  ucp_address_t* a = nullptr;
  size_t len = 0;
  ucp_ep_h e = nullptr;
  if (ucp_worker_get_address(s.w, &a, &len) != UCS_OK) return nullptr;
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_FLAGS;
  ep.address = a;
  ep.flags = flags;
  if (ucp_ep_create(s.w, &ep, &e) != UCS_OK) e = nullptr;
  ucp_worker_release_address(s.w, a);
  return e;
}

TEST(ucp, loopback_endpoints) {
  side s;
  s.init();
  ucp_ep_h self = ep_to_self(s), nl = ep_to_self(s, UCP_EP_PARAMS_FLAGS_NO_LOOPBACK);
  ASSERT_TRUE(self && nl);
  uint64_t v = 77, r = 0;
  ucp_request_param_t p = send_param();
  void* rr = ucp_tag_recv_nbx(s.w, &r, sizeof r, 1, ~0ull, nullptr);
  EXPECT_EQ(s.wait(ucp_tag_send_nbx(self, &v, sizeof v, 1, &p)), UCS_OK);
  EXPECT_EQ(s.wait(rr), UCS_OK);
  EXPECT_EQ(r, 77u);
  char msg[] = "to myself";
  char got[sizeof msg] = {};
  EXPECT_EQ(s.wait(ucp_stream_send_nbx(self, msg, sizeof msg, &p)), UCS_OK);
  size_t gl = 0;
  ucp_request_param_t sp{};
  sp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  sp.flags = UCP_STREAM_RECV_FLAG_WAITALL;
  EXPECT_EQ(s.wait(ucp_stream_recv_nbx(self, got, sizeof got, &gl, &sp)), UCS_OK);
  EXPECT_STREQ(got, msg);
  rr = ucp_tag_recv_nbx(s.w, &r, sizeof r, 2, ~0ull, nullptr);
  v = 88;
  EXPECT_EQ(s.wait(ucp_tag_send_sync_nbx(nl, &v, sizeof v, 2, &p)), UCS_OK);
  EXPECT_EQ(s.wait(rr), UCS_OK);
  EXPECT_EQ(r, 88u);
  for (ucp_ep_h e : {self, nl}) {
    s.ep = e;
    s.close_ep();
  }
  s.fini();
  EXPECT_EQ(g_fail, 0);
}

// The UCX 1.15-1.18 calls (ucp_1_18.h) on a loopback endpoint: a memory
// handle packed by ucp_memh_pack is a remote key a put goes through; keys
// compare equal exactly when they reach the same registration; datatypes
// report their packed size.
namespace {
size_t g_packed = 0;
void* dtq_start(void*, const void*, size_t count) {
  g_packed = count * 3;
  return &g_packed;
}
size_t dtq_size(void* state) {
  return *static_cast<size_t*>(state);
}
void dtq_finish(void* state) {
  *static_cast<size_t*>(state) = 0;
}
void* dtq_start_unpack(void*, void*, size_t) {
  return &g_packed;
}
size_t dtq_pack(void*, size_t, void*, size_t) {
  return 0;
}
ucs_status_t dtq_unpack(void*, size_t, const void*, size_t) {
  return UCS_OK;
}
}  // namespace

TEST(ucp, memh_pack_rkey_compare_dt_query) {
  side s;
  s.init();
  s.ep = ep_to_self(s);
  ASSERT_NE(s.ep, nullptr);

  std::vector<uint64_t> dst(64, 0), other(64, 0);
  ucp_mem_h mh = nullptr, mh2 = nullptr;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = dst.data();
  mp.length = dst.size() * sizeof(uint64_t);
  ASSERT_EQ(ucp_mem_map(s.ctx, &mp, &mh), UCS_OK);
  mp.address = other.data();
  ASSERT_EQ(ucp_mem_map(s.ctx, &mp, &mh2), UCS_OK);

  void* b1 = nullptr;
  void* b2 = nullptr;
  void* b3 = nullptr;
  size_t n1 = 0, n2 = 0, n3 = 0;
  ucp_memh_pack_params_t pp{};
  EXPECT_EQ(ucp_memh_pack(mh, nullptr, &b1, &n1), UCS_OK);
  EXPECT_EQ(ucp_memh_pack(mh, &pp, &b2, &n2), UCS_OK);
  EXPECT_EQ(ucp_memh_pack(mh2, &pp, &b3, &n3), UCS_OK);
  pp.field_mask = UCP_MEMH_PACK_PARAM_FIELD_FLAGS;
  pp.flags = UCP_MEMH_PACK_FLAG_EXPORT;
  void* bx = nullptr;
  size_t nx = 0;
  EXPECT_EQ(ucp_memh_pack(mh, &pp, &bx, &nx), UCS_ERR_UNSUPPORTED);
  pp.flags = 1u << 5;
  EXPECT_EQ(ucp_memh_pack(mh, &pp, &bx, &nx), UCS_ERR_INVALID_PARAM);
  pp.field_mask = 1u << 4;
  EXPECT_EQ(ucp_memh_pack(mh, &pp, &bx, &nx), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(ucp_memh_pack(nullptr, nullptr, &bx, &nx), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(ucp_memh_pack(mh, nullptr, nullptr, &nx), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(bx, nullptr);

  ucp_rkey_h k1 = nullptr, k2 = nullptr, k3 = nullptr;
  ASSERT_EQ(ucp_ep_rkey_unpack(s.ep, b1, &k1), UCS_OK);
  ASSERT_EQ(ucp_ep_rkey_unpack(s.ep, b2, &k2), UCS_OK);
  ASSERT_EQ(ucp_ep_rkey_unpack(s.ep, b3, &k3), UCS_OK);
  ucp_memh_buffer_release_params_t rp{};
  ucp_memh_buffer_release(b1, &rp);
  ucp_memh_buffer_release(b2, nullptr);
  ucp_memh_buffer_release(b3, &rp);

  // The key from ucp_memh_pack carries a put.
  std::vector<uint64_t> src(64);
  for (size_t i = 0; i < src.size(); i++) src[i] = 0x1800 + i;
  ucp_request_param_t p{};
  EXPECT_EQ(s.wait(ucp_put_nbx(s.ep, src.data(), src.size() * sizeof(uint64_t),
                               reinterpret_cast<uintptr_t>(dst.data()), k1, &p)),
            UCS_OK);
  EXPECT_EQ(s.wait(ucp_ep_flush_nbx(s.ep, &p)), UCS_OK);
  EXPECT_EQ(dst, src);

  ucp_rkey_compare_params_t cp{};
  int r12 = 7, r13 = 0, r31 = 0;
  EXPECT_EQ(ucp_rkey_compare(s.w, k1, k2, &cp, &r12), UCS_OK);
  EXPECT_EQ(r12, 0);
  EXPECT_EQ(ucp_rkey_compare(s.w, k1, k3, &cp, &r13), UCS_OK);
  EXPECT_EQ(ucp_rkey_compare(s.w, k3, k1, &cp, &r31), UCS_OK);
  EXPECT_NE(r13, 0);
  EXPECT_EQ(r13, -r31);
  cp.field_mask = 1;
  EXPECT_EQ(ucp_rkey_compare(s.w, k1, k2, &cp, &r12), UCS_ERR_INVALID_PARAM);
  cp.field_mask = 0;
  EXPECT_EQ(ucp_rkey_compare(s.w, k1, nullptr, &cp, &r12), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(ucp_rkey_compare(s.w, k1, k2, nullptr, &r12), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(ucp_rkey_compare(s.w, k1, k2, &cp, nullptr), UCS_ERR_INVALID_PARAM);
  for (ucp_rkey_h k : {k1, k2, k3}) ucp_rkey_destroy(k);

  // Packed sizes: contiguous, IOV, generic.
  ucp_datatype_attr_t da{};
  da.field_mask = UCP_DATATYPE_ATTR_FIELD_PACKED_SIZE;
  EXPECT_EQ(ucp_dt_query(ucp_dt_make_contig(8), &da), UCS_OK);
  EXPECT_EQ(da.packed_size, 8u);
  da.field_mask |= UCP_DATATYPE_ATTR_FIELD_COUNT;
  da.count = 5;
  EXPECT_EQ(ucp_dt_query(ucp_dt_make_contig(8), &da), UCS_OK);
  EXPECT_EQ(da.packed_size, 40u);
  ucp_dt_iov_t iov[2] = {{src.data(), 16}, {dst.data(), 24}};
  da.field_mask |= UCP_DATATYPE_ATTR_FIELD_BUFFER;
  da.buffer = iov;
  da.count = 2;
  EXPECT_EQ(ucp_dt_query(ucp_dt_make_iov(), &da), UCS_OK);
  EXPECT_EQ(da.packed_size, 40u);
  ucp_generic_dt_ops_t ops{dtq_start, dtq_start_unpack, dtq_size, dtq_pack, dtq_unpack, dtq_finish};
  ucp_datatype_t gdt = 0;
  ASSERT_EQ(ucp_dt_create_generic(&ops, nullptr, &gdt), UCS_OK);
  da.buffer = src.data();
  da.count = 7;
  EXPECT_EQ(ucp_dt_query(gdt, &da), UCS_OK);
  EXPECT_EQ(da.packed_size, 21u);
  EXPECT_EQ(g_packed, 0u);  // the pack state was finished
  da.field_mask = UCP_DATATYPE_ATTR_FIELD_PACKED_SIZE;  // generic needs its buffer
  EXPECT_EQ(ucp_dt_query(gdt, &da), UCS_ERR_INVALID_PARAM);
  da.field_mask = UCP_DATATYPE_ATTR_FIELD_PACKED_SIZE | (1u << 6);
  EXPECT_EQ(ucp_dt_query(ucp_dt_make_contig(1), &da), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(ucp_dt_query(ucp_dt_make_contig(1), nullptr), UCS_ERR_INVALID_PARAM);
  ucp_dt_destroy(gdt);

  EXPECT_EQ(ucp_mem_unmap(s.ctx, mh), UCS_OK);
  EXPECT_EQ(ucp_mem_unmap(s.ctx, mh2), UCS_OK);
  s.fini();
  EXPECT_EQ(g_fail, 0);
}

// libuct.so.0 (docs/ucp.md): weft's components and transports listed, an
// interface that opens, advertises nothing and refuses every operation, and
// bad arguments refused. libucs's string helpers as UCX's tools use them.
TEST(uct, components_interfaces_unsupported_operations) {
  uct_component_h* comps = nullptr;
  unsigned nc = 0;
  ASSERT_EQ(uct_query_components(&comps, &nc), UCS_OK);
  EXPECT_EQ(uct_query_components(nullptr, &nc), UCS_ERR_INVALID_PARAM);
  ucs_async_context_t* async = nullptr;
  ASSERT_EQ(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async), UCS_OK);
  uct_worker_h worker = nullptr;
  ASSERT_EQ(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker), UCS_OK);
  EXPECT_EQ(uct_worker_progress(worker), 0u);
  std::vector<std::string> seen;
  for (unsigned c = 0; c < nc; c++) {
    uct_component_attr_t ca{};
    ca.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT |
                    UCT_COMPONENT_ATTR_FIELD_FLAGS;
    ASSERT_EQ(uct_component_query(comps[c], &ca), UCS_OK);
    ASSERT_EQ(ca.md_resource_count, 1u);
    EXPECT_EQ(ca.flags, 0u);  // no connection manager
    uct_md_resource_desc_t mdr{};
    ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    ca.md_resources = &mdr;
    ASSERT_EQ(uct_component_query(comps[c], &ca), UCS_OK);
    uct_md_config_t* mc = nullptr;
    ASSERT_EQ(uct_md_config_read(comps[c], nullptr, nullptr, &mc), UCS_OK);
    uct_md_h md = nullptr;
    EXPECT_EQ(uct_md_open(comps[c], "no-such-md", mc, &md), UCS_ERR_NO_DEVICE);
    ASSERT_EQ(uct_md_open(comps[c], mdr.md_name, mc, &md), UCS_OK);
    uct_config_release(mc);
    uct_md_attr_t mattr;
    ASSERT_EQ(uct_md_query(md, &mattr), UCS_OK);
    EXPECT_EQ(mattr.cap.flags, 0u);
    EXPECT_STREQ(mattr.component_name, ca.name);
    uct_mem_h memh = nullptr;
    char buf[64];
    EXPECT_EQ(uct_md_mem_reg(md, buf, sizeof buf, 0, &memh), UCS_ERR_UNSUPPORTED);
    EXPECT_EQ(uct_md_mem_reg(md, nullptr, sizeof buf, 0, &memh), UCS_ERR_INVALID_PARAM);
    uct_tl_resource_desc_t* tls = nullptr;
    unsigned nt = 0;
    ASSERT_EQ(uct_md_query_tl_resources(md, &tls, &nt), UCS_OK);
    for (unsigned t = 0; t < nt; t++) {
      seen.push_back(std::string(tls[t].tl_name) + "/" + tls[t].dev_name);
      uct_iface_config_t* ic = nullptr;
      ASSERT_EQ(uct_md_iface_config_read(md, tls[t].tl_name, nullptr, nullptr, &ic), UCS_OK);
      uct_iface_params_t ip{};
      ip.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE;
      ip.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
      ip.mode.device.tl_name = tls[t].tl_name;
      ip.mode.device.dev_name = "no-such-device";
      uct_iface_h iface = nullptr;
      EXPECT_EQ(uct_iface_open(md, worker, &ip, ic, &iface), UCS_ERR_NO_DEVICE);
      ip.mode.device.dev_name = tls[t].dev_name;
      ASSERT_EQ(uct_iface_open(md, worker, &ip, ic, &iface), UCS_OK);
      uct_config_release(ic);
      uct_iface_attr_t ia;
      ASSERT_EQ(uct_iface_query(iface, &ia), UCS_OK);
      EXPECT_EQ(ia.cap.flags, 0u);
      EXPECT_EQ(ia.iface_addr_len, 0u);
      EXPECT_EQ(uct_iface_progress(iface), 0u);
      EXPECT_EQ(uct_iface_flush(iface, 0, nullptr), UCS_OK);
      EXPECT_EQ(uct_iface_is_reachable(iface, nullptr, nullptr), 0);
      EXPECT_EQ(uct_iface_set_am_handler(iface, 1, [](void*, void*, size_t, unsigned) { return UCS_OK; },
                                         nullptr, 0),
                UCS_ERR_UNSUPPORTED);
      uct_ep_params_t ep{};
      ep.field_mask = UCT_EP_PARAM_FIELD_IFACE;
      ep.iface = iface;
      uct_ep_h e = nullptr;
      EXPECT_EQ(uct_ep_create(&ep, &e), UCS_ERR_UNSUPPORTED);
      // The operations table, as a program's inline calls reach it.
      uct_ep_t fake{iface};
      EXPECT_EQ(uct_ep_put_short(&fake, buf, 8, 0, 0), UCS_ERR_UNSUPPORTED);
      EXPECT_EQ(uct_ep_am_bcopy(&fake, 1, [](void*, void*) -> size_t { return 0; }, nullptr, 0),
                static_cast<ssize_t>(UCS_ERR_UNSUPPORTED));
      uct_iface_close(iface);
    }
    uct_release_tl_resource_list(tls);
    uct_md_close(md);
  }
  uct_worker_destroy(worker);
  ucs_async_context_destroy(async);
  uct_release_component_list(comps);
  // What fi_getinfo finds under weft's face: shm always, tcp on loopback.
  EXPECT_NE(std::find(seen.begin(), seen.end(), "shm/memory"), seen.end());
  EXPECT_NE(std::find(seen.begin(), seen.end(), "tcp/lo"), seen.end());

  char mem[16];
  EXPECT_STREQ(ucs_memunits_to_str(4096, mem, sizeof mem), "4K");
  EXPECT_STREQ(ucs_memunits_to_str(1000, mem, sizeof mem), "1000");
  EXPECT_STREQ(ucs_memunits_to_str(UCS_MEMUNITS_INF, mem, sizeof mem), "inf");
  UCS_STRING_BUFFER_ONSTACK(fixed, 8);
  ucs_string_buffer_appendf(&fixed, "%s/", "abcdefghij");
  EXPECT_STREQ(ucs_string_buffer_cstr(&fixed), "abcdefg");  // truncated to its capacity
  ucs_string_buffer_t dyn = UCS_STRING_BUFFER_INITIALIZER;
  ucs_string_buffer_appendf(&dyn, "%s/", "tag_lat");
  ucs_string_buffer_appendf(&dyn, "%d//", 42);
  ucs_string_buffer_rtrim(&dyn, "/");
  EXPECT_STREQ(ucs_string_buffer_cstr(&dyn), "tag_lat/42");
  ucs_string_buffer_cleanup(&dyn);
  ucs_string_buffer_cleanup(&fixed);  // the caller's memory: left alone
}

// FORCE close: requests in flight end UCS_ERR_CANCELED at once.
TEST(ucp, close_force_cancels_requests) {
  two([](side& s) {
    s.init();
    s.connect();
    if (s.rank == 0) {
      std::vector<uint8_t> big(8 << 20, 1);
      ucp_request_param_t p = send_param();
      void* r = ucp_tag_send_nbx(s.ep, big.data(), big.size(), 3, &p);  // the peer never receives it
      void* r2 = ucp_tag_send_sync_nbx(s.ep, big.data(), 8, 4, &p);
      CK(UCS_PTR_IS_PTR(r) && UCS_PTR_IS_PTR(r2));
      s.barrier();
      ucp_request_param_t cp{};
      cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* c = ucp_ep_close_nbx(s.ep, &cp);
      CK(!UCS_PTR_IS_ERR(c));
      if (UCS_PTR_IS_PTR(c)) CK(s.wait(c) == UCS_OK);
      s.ep = nullptr;
      s.progress();
      auto* a = static_cast<app_req*>(r);
      auto* a2 = static_cast<app_req*>(r2);
      CK(a->done && a->status == UCS_ERR_CANCELED);
      CK(a2->done && a2->status == UCS_ERR_CANCELED);
      CK(ucp_request_check_status(r) == UCS_ERR_CANCELED);
      ucp_request_free(r);
      ucp_request_free(r2);
      s.barrier();
    } else {
      s.barrier();
      s.barrier();
    }
    s.fini();
  });
}

// UCP_ERR_HANDLING_MODE_PEER: the peer is killed; the error handler runs and
// the requests outstanding towards it complete in error within 10 s.
TEST(ucp, peer_killed_error_handler_and_requests) {
  two(
      [](side& s) {
        s.init();
        s.connect(UCP_ERR_HANDLING_MODE_PEER);
        if (s.rank == 1) {
          s.barrier();
          raise(SIGKILL);
        }
        std::vector<uint8_t> big(8 << 20, 1);
        ucp_request_param_t p = send_param();
        void* r = ucp_tag_send_nbx(s.ep, big.data(), big.size(), 3, &p);  // never received
        void* r2 = ucp_tag_send_sync_nbx(s.ep, big.data(), 8, 4, &p);     // never matched
        ucp_request_param_t fp{};
        void* fl = ucp_ep_flush_nbx(s.ep, &fp);
        s.barrier();
        double t0 = now();
        while ((!s.err_calls || ucp_request_check_status(r2) == UCS_INPROGRESS ||
                (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS)) &&
               now() - t0 < 10)
          s.progress();
        if (now() - t0 >= 10)
          fprintf(stderr, "after 10 s: handler calls %d (%s), large send %d, sync send %d\n", s.err_calls,
                  ucs_status_string(s.ep_error), UCS_PTR_IS_PTR(r) ? ucp_request_check_status(r) : 0,
                  ucp_request_check_status(r2));
        CK(now() - t0 < 10);
        CK(s.err_calls == 1);
        CK(s.ep_error != UCS_OK);
        if (UCS_PTR_IS_PTR(r)) {
          CK(ucp_request_check_status(r) != UCS_INPROGRESS);
          ucp_request_free(r);
        }
        CK(ucp_request_check_status(r2) != UCS_INPROGRESS && ucp_request_check_status(r2) != UCS_OK);
        ucp_request_free(r2);
        if (UCS_PTR_IS_PTR(fl)) {
          while (ucp_request_check_status(fl) == UCS_INPROGRESS && now() - t0 < 15) s.progress();
          CK(ucp_request_check_status(fl) != UCS_INPROGRESS);
          ucp_request_free(fl);
        }
        // later sends fail at once
        uint8_t b = 0;
        CK(UCS_PTR_IS_ERR(ucp_tag_send_nbx(s.ep, &b, 1, 5, &p)));
        s.close_ep(true);
        s.fini();
      },
      true);
}

// ---------------------------------------------------------------- wakeup
TEST(ucp, wakeup_efd_arm_signal) {
  two([](side& s) {
    s.init();
    s.connect();
    if (s.rank == 0) {
      int efd = -1;
      CK(ucp_worker_get_efd(s.w, &efd) == UCS_OK && efd >= 0);
      uint64_t v = 0;
      void* r = ucp_tag_recv_nbx(s.w, &v, sizeof v, 9, ~0ull, nullptr);
      char go = 1;
      s.put(&go, 1);
      double t0 = now();
      while (ucp_request_check_status(r) == UCS_INPROGRESS && now() - t0 < 10) {
        if (ucp_worker_progress(s.w)) continue;
        ucs_status_t st = ucp_worker_arm(s.w);
        if (st == UCS_ERR_BUSY) continue;
        CK(st == UCS_OK);
        pollfd pf{efd, POLLIN, 0};
        CK(poll(&pf, 1, 5000) == 1);
      }
      CK(s.wait(r) == UCS_OK && v == 1234);
      // ucp_worker_signal wakes a waiting worker
      std::thread t([&] {
        usleep(20000);
        ucp_worker_signal(s.w);
      });
      CK(ucp_worker_wait(s.w) == UCS_OK);
      t.join();
      s.barrier();
    } else {
      char go;
      CK(s.get(&go, 1));
      usleep(50000);
      uint64_t v = 1234;
      CK(s.wait(ucp_tag_send_nbx(s.ep, &v, sizeof v, 9, nullptr)) == UCS_OK);
      s.barrier();
    }
    s.fini();
  });
}

// ---------------------------------------------------------------- threads
TEST(ucp, multi_thread_worker) {
  two([](side& s) {
    s.init(all_features, UCS_THREAD_MODE_MULTI);
    s.connect();
    enum { PER = 300 };
    if (s.rank == 0) {
      std::vector<std::thread> ts;
      for (int t = 0; t < 2; t++)
        ts.emplace_back([&, t] {
          for (uint32_t i = 0; i < PER; i++) {
            uint32_t v = t * 100000 + i;
            void* r = ucp_tag_send_nbx(s.ep, &v, sizeof v, 100 + t, nullptr);
            while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS)
              ucp_worker_progress(s.w);
            if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
          }
        });
      for (auto& t : ts) t.join();
      s.barrier();
    } else {
      for (int t = 0; t < 2; t++)
        for (uint32_t i = 0; i < PER; i++) {
          uint32_t v = 0;
          CK(s.wait(ucp_tag_recv_nbx(s.w, &v, sizeof v, 100 + t, ~0ull, nullptr)) == UCS_OK);
          CK(v == t * 100000 + i);
        }
      s.barrier();
    }
    s.fini();
  });
}

// ---------------------------------------------------------------- client/server
struct server_ctx {
  ucp_conn_request_h req = nullptr;
  int reqs = 0;
};
void on_conn(ucp_conn_request_h r, void* arg) {
  auto* c = static_cast<server_ctx*>(arg);
  c->reqs++;
  if (!c->req) c->req = r;
}

// A listener on 127.0.0.1 (a port the system picks) whose requests land in sc.
ucp_listener_h listen_loopback(ucp_worker_h w, server_ctx& sc, sockaddr_in& sa, uint16_t* port) {
  sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<sockaddr*>(&sa);
  lp.sockaddr.addrlen = sizeof sa;
  lp.conn_handler.cb = on_conn;
  lp.conn_handler.arg = &sc;
  ucp_listener_h l = nullptr;
  if (ucp_listener_create(w, &lp, &l) != UCS_OK) return nullptr;
  ucp_listener_attr_t la{};
  la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  *port = 0;
  if (ucp_listener_query(l, &la) == UCS_OK) *port = ntohs(reinterpret_cast<sockaddr_in*>(&la.sockaddr)->sin_port);
  return l;
}

TEST(ucp, client_server_listener) {
  // The listener needs a provider with connection management: tcp (weft's,
  // or Debian's in api_real_fabric).
  side probe;
  probe.init();
  sockaddr_in sa;
  server_ctx sc;
  uint16_t port = 0;
  ucp_listener_h l = listen_loopback(probe.w, sc, sa, &port);
  ASSERT_TRUE(l);
  ASSERT_NE(port, 0);
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    g_fail = 0;
    side c;
    c.init();
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_CLIENT_ID;
    wp.client_id = 0x5eed;
    ucp_worker_destroy(c.w);
    CK(ucp_worker_create(c.ctx, &wp, &c.w) == UCS_OK);
    sockaddr_in to = sa;
    to.sin_port = htons(port);
    for (int k = 0; k < 2; k++) {
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_USER_DATA;
      ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER | UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID;
      ep.sockaddr.addr = reinterpret_cast<sockaddr*>(&to);
      ep.sockaddr.addrlen = sizeof to;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = side::on_error;
      ep.user_data = &c;
      // The first connection leaves from 127.0.0.2 (UCP_EP_PARAM_FIELD_LOCAL_SOCK_ADDR).
      sockaddr_in from{};
      from.sin_family = AF_INET;
      from.sin_addr.s_addr = htonl(0x7f000002);
      if (k == 0) {
        ep.field_mask |= UCP_EP_PARAM_FIELD_LOCAL_SOCK_ADDR;
        ep.local_sockaddr.addr = reinterpret_cast<sockaddr*>(&from);
        ep.local_sockaddr.addrlen = sizeof from;
      }
      CK(ucp_ep_create(c.w, &ep, &c.ep) == UCS_OK);
      if (k == 1) {
        // The second connection is rejected: it never carries data, and the
        // client's error handler hears UCS_ERR_REJECTED (as over UCX).
        uint32_t v = 1;
        void* r = ucp_tag_send_sync_nbx(c.ep, &v, sizeof v, 3, nullptr);
        double t0 = now();
        while (!c.err_calls && now() - t0 < 10) c.progress();
        CK(c.err_calls == 1);
        CK(c.ep_error == UCS_ERR_REJECTED);
        c.close_ep(true);
        if (UCS_PTR_IS_PTR(r)) {
          CK(ucp_request_check_status(r) != UCS_INPROGRESS);
          ucp_request_free(r);
        }
        break;
      }
      char msg[] = "hello over tcp connection management";
      CK(c.wait(ucp_tag_send_nbx(c.ep, msg, sizeof msg, 1, nullptr)) == UCS_OK);
      CK(c.wait(ucp_stream_send_nbx(c.ep, msg, sizeof msg, nullptr)) == UCS_OK);
      char back[64] = {};
      CK(c.wait(ucp_tag_recv_nbx(c.w, back, sizeof back, 2, ~0ull, nullptr)) == UCS_OK);
      CK(!strcmp(back, "reply"));
      ucp_ep_attr_t a{};
      a.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR | UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR;
      CK(ucp_ep_query(c.ep, &a) == UCS_OK);
      CK(ntohs(reinterpret_cast<sockaddr_in*>(&a.remote_sockaddr)->sin_port) == port);
      CK(reinterpret_cast<sockaddr_in*>(&a.local_sockaddr)->sin_addr.s_addr == htonl(0x7f000002));
      c.close_ep();
    }
    c.fini();
    _exit(g_fail ? 1 : 0);
  }
  // server: accept on a second worker, as UCX's example does
  side data;
  data.ctx = probe.ctx;
  ucp_worker_params_t wp{};
  ASSERT_EQ(ucp_worker_create(probe.ctx, &wp, &data.w), UCS_OK);
  double t0 = now();
  while (!sc.req && now() - t0 < 10) probe.progress();
  ASSERT_TRUE(sc.req);
  ucp_conn_request_attr_t ca{};
  ca.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR | UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID;
  EXPECT_EQ(ucp_conn_request_query(sc.req, &ca), UCS_OK);
  EXPECT_EQ(ca.client_id, 0x5eedu);
  EXPECT_EQ(ca.client_address.ss_family, AF_INET);
  EXPECT_EQ(reinterpret_cast<sockaddr_in*>(&ca.client_address)->sin_addr.s_addr, htonl(0x7f000002))
      << "the client's local_sockaddr";
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
  ep.conn_request = sc.req;
  ASSERT_EQ(ucp_ep_create(data.w, &ep, &data.ep), UCS_OK);
  char got[64] = {};
  EXPECT_EQ(data.wait(ucp_tag_recv_nbx(data.w, got, sizeof got, 1, ~0ull, nullptr)), UCS_OK);
  EXPECT_STREQ(got, "hello over tcp connection management");
  memset(got, 0, sizeof got);
  size_t gl = 0;
  ucp_request_param_t sp{};
  sp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  sp.flags = UCP_STREAM_RECV_FLAG_WAITALL;
  EXPECT_EQ(data.wait(ucp_stream_recv_nbx(data.ep, got, strlen("hello over tcp connection management") + 1,
                                          &gl, &sp)),
            UCS_OK);
  EXPECT_STREQ(got, "hello over tcp connection management");
  EXPECT_EQ(data.wait(ucp_tag_send_nbx(data.ep, "reply", 6, 2, nullptr)), UCS_OK);
  // the second request: rejected
  sc.req = nullptr;
  t0 = now();
  while (!sc.req && now() - t0 < 10) {
    probe.progress();
    data.progress();
  }
  ASSERT_TRUE(sc.req);
  EXPECT_EQ(ucp_listener_reject(l, sc.req), UCS_OK);
  int status = 0;
  t0 = now();
  while (waitpid(pid, &status, WNOHANG) != pid && now() - t0 < 20) {
    probe.progress();
    data.progress();
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  data.close_ep(true);
  ucp_worker_destroy(data.w);
  ucp_listener_destroy(l);
  probe.fini();
  EXPECT_EQ(g_fail, 0);
}

// The server receives every message and closes its endpoint with FORCE, as
// Debian's ucp_client_server does after its last iteration. The client's
// sends had all been taken by the provider (their completions were waiting
// in its queue, more than one progress call reads at a time) when it learns
// of the disconnection: every one completes with UCS_OK, none with the
// reset (the first failure CI saw was the example's client hearing
// "Connection reset by remote peer" for a message the server had printed).
TEST(ucp, client_server_sends_taken_before_peer_close_succeed) {
  constexpr int n = 40;
  constexpr size_t len = 16;
  two([](side& s) {
    s.init();
    sockaddr_in sa;
    uint16_t port = 0;
    if (s.rank == 0) {
      server_ctx sc;
      ucp_listener_h l = listen_loopback(s.w, sc, sa, &port);
      CK(l && port);
      s.put(&port, sizeof port);
      double t0 = now();
      while (!sc.req && now() - t0 < 10) s.progress();
      CK(sc.req);
      if (!sc.req) return;
      // The data worker, as the example's server has.
      side data;
      data.sock = s.sock;
      ucp_worker_params_t wp{};
      CK(ucp_worker_create(s.ctx, &wp, &data.w) == UCS_OK);
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
      ep.conn_request = sc.req;
      CK(ucp_ep_create(data.w, &ep, &data.ep) == UCS_OK);
      uint32_t v = 0;
      CK(data.wait(ucp_tag_recv_nbx(data.w, &v, sizeof v, 1, ~0ull, nullptr)) == UCS_OK);
      CK(data.wait(ucp_tag_send_nbx(data.ep, &v, sizeof v, 2, nullptr)) == UCS_OK);
      char go = 0;
      CK(data.get(&go, 1));
      for (int i = 0; i < n; i++) {
        uint8_t got[len] = {};
        CK(data.wait(ucp_tag_recv_nbx(data.w, got, len, 3, ~0ull, nullptr)) == UCS_OK);
        CK(same(got, len, i));
      }
      data.close_ep(true);
      data.put(&go, 1);
      CK(data.get(&go, 1));  // the client's verdict is in
      ucp_worker_destroy(data.w);
      ucp_listener_destroy(l);
      s.fini();
      return;
    }
    CK(s.get(&port, sizeof port));
    sa = {};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(port);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_USER_DATA;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = reinterpret_cast<sockaddr*>(&sa);
    ep.sockaddr.addrlen = sizeof sa;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = side::on_error;
    ep.user_data = &s;
    CK(ucp_ep_create(s.w, &ep, &s.ep) == UCS_OK);
    // Connected both ways once the server's reply is here.
    uint32_t v = 7;
    CK(s.wait(ucp_tag_send_nbx(s.ep, &v, sizeof v, 1, nullptr)) == UCS_OK);
    CK(s.wait(ucp_tag_recv_nbx(s.w, &v, sizeof v, 2, ~0ull, nullptr)) == UCS_OK);
    // Requests (not completed at return), and no progress until the server
    // has taken them all and closed.
    std::vector<std::vector<uint8_t>> bufs(n, std::vector<uint8_t>(len));
    std::vector<void*> reqs(n);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    for (int i = 0; i < n; i++) {
      fill(bufs[i].data(), len, i);
      reqs[i] = ucp_tag_send_nbx(s.ep, bufs[i].data(), len, 3, &p);
      CK(UCS_PTR_IS_PTR(reqs[i]));
    }
    char go = 1;
    s.put(&go, 1);
    ucp_worker_h w = s.w;
    s.w = nullptr;  // get() reads the socket without progressing
    CK(s.get(&go, 1));
    s.w = w;
    usleep(300000);  // the disconnection reaches the event queue
    double t0 = now();
    int done = 0;
    while (done < n && now() - t0 < 10) {
      s.progress();
      done = 0;
      for (void* r : reqs) done += UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) != UCS_INPROGRESS;
    }
    CK(done == n);
    for (int i = 0; i < n; i++) {
      if (!UCS_PTR_IS_PTR(reqs[i])) continue;
      ucs_status_t st = ucp_request_check_status(reqs[i]);
      if (st != UCS_OK) fprintf(stderr, "send %d of %d: %s\n", i, n, ucs_status_string(st));
      CK(st == UCS_OK);
      if (st != UCS_INPROGRESS) ucp_request_free(reqs[i]);
    }
    // Then the endpoint fails, as before: checked over weft. Over Debian's
    // libfabric (api_real_fabric preloads it) this client did not hear of
    // the server's shutdown within 10 s (left alone here: the sends above
    // are this case's point).
    const char* pre = getenv("LD_PRELOAD");
    if (!pre || !strstr(pre, "libfabric")) {
      t0 = now();
      while (!s.err_calls && now() - t0 < 10) s.progress();
      CK(s.err_calls == 1 && s.ep_error == UCS_ERR_CONNECTION_RESET);
    }
    s.put(&go, 1);
    s.close_ep(true);
    s.fini();
  });
}

// ---------------------------------------------------------------- the rest of one process's calls
// The old API's callbacks (no user_data).
void stream_nb_cb(void* r, ucs_status_t st, size_t len) {
  stream_cb(r, st, len, nullptr);
}
void send_nb_cb(void* r, ucs_status_t st) {
  send_cb(r, st, nullptr);
}
void recv_nb_cb(void* r, ucs_status_t st, ucp_tag_recv_info_t* info) {
  recv_cb(r, st, info, nullptr);
}

struct ucm_seen {
  int calls = 0;
  void* addr = nullptr;
  size_t size = 0;
};
void ucm_cb(ucm_event_type_t, ucm_event_t* ev, void* arg) {
  auto* s = static_cast<ucm_seen*>(arg);
  s->calls++;
  s->addr = ev->vm_unmapped.address;
  s->size = ev->vm_unmapped.size;
}

TEST(ucp, version_memory_requests_and_ucm) {
  EXPECT_STREQ(ucp_get_version_string(), "1.17.0");
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_REQUEST_INIT |
                 UCP_PARAM_FIELD_REQUEST_CLEANUP | UCP_PARAM_FIELD_NAME;
  p.features = all_features;
  p.request_size = sizeof(app_req);
  p.request_init = req_init;
  p.request_cleanup = req_cleanup;
  p.name = "named-context";
  const int inits_before = g_req_inits, cleanups_before = g_req_cleanups;
  ucp_context_h ctx = nullptr;
  ASSERT_EQ(ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, nullptr, &ctx), UCS_OK);
  ucp_context_attr_t ca{};
  ca.field_mask = UCP_ATTR_FIELD_NAME;
  ASSERT_EQ(ucp_context_query(ctx, &ca), UCS_OK);
  EXPECT_STREQ(ca.name, "named-context");
  // A worker whose wakeups go to the application's own epoll set.
  int ep_fd = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep_fd, 0);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_EVENT_FD | UCP_WORKER_PARAM_FIELD_USER_DATA |
                  UCP_WORKER_PARAM_FIELD_NAME | UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.event_fd = ep_fd;
  wp.user_data = &wp;
  wp.name = "named-worker";
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h w = nullptr;
  ASSERT_EQ(ucp_worker_create(ctx, &wp, &w), UCS_OK);
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_NAME | UCP_WORKER_ATTR_FIELD_THREAD_MODE;
  ASSERT_EQ(ucp_worker_query(w, &wa), UCS_OK);
  EXPECT_STREQ(wa.name, "named-worker");
  EXPECT_EQ(wa.thread_mode, UCS_THREAD_MODE_SERIALIZED);
  int efd = -1;
  EXPECT_EQ(ucp_worker_get_efd(w, &efd), UCS_ERR_UNSUPPORTED) << "the events go to the given fd";
  ASSERT_EQ(ucp_worker_signal(w), UCS_OK);
  epoll_event ev{};
  EXPECT_EQ(epoll_wait(ep_fd, &ev, 1, 1000), 1) << "the signal reaches the application's epoll set";
  EXPECT_EQ(ev.data.ptr, &wp) << "with the worker's user_data";
  // Nothing in flight: the flushes complete at once.
  EXPECT_EQ(ucp_worker_flush_nb(w, 0, send_nb_cb), nullptr);
  ucp_request_param_t fp{};
  EXPECT_EQ(ucp_worker_flush_nbx(w, &fp), nullptr);
  // ucp_worker_wait_mem returns (no transport wakes on a write here).
  uint64_t word = 1;
  ucp_worker_wait_mem(w, &word);
  // Requests made for the application: request_init ran, idle, queried, freed.
  void* req = ucp_request_alloc(w);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(static_cast<app_req*>(req)->magic, 0xfeedf00du);
  EXPECT_NE(ucp_request_is_completed(req), 0) << "nothing under way";
  ucp_request_attr_t ra{};
  char dbg[128] = {};
  ra.field_mask = UCP_REQUEST_ATTR_FIELD_STATUS | UCP_REQUEST_ATTR_FIELD_MEM_TYPE |
                  UCP_REQUEST_ATTR_FIELD_INFO_STRING | UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE;
  ra.debug_string = dbg;
  ra.debug_string_size = sizeof dbg;
  ASSERT_EQ(ucp_request_query(req, &ra), UCS_OK);
  EXPECT_EQ(ra.status, UCS_OK);
  EXPECT_EQ(ra.mem_type, UCS_MEMORY_TYPE_HOST);
  EXPECT_NE(strstr(dbg, "request"), nullptr) << dbg;
  EXPECT_EQ(ucp_request_query(nullptr, &ra), UCS_ERR_INVALID_PARAM);
  ucp_request_free(req);
  // The pool stays bounded: requests allocated and freed are reused.
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> many;
    for (int i = 0; i < 200; ++i) many.push_back(ucp_request_alloc(w));
    for (void* r : many) {
      CK(r != nullptr);
      ucp_request_release(r);
    }
  }
  // Memory: a fixed-address allocation, advice, the allocation report.
  const size_t len = 64 * 1024;
  void* hole = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  munmap(hole, len);  // a free range to ask for
  ucp_mem_map_params_t mp{};
  mp.field_mask =
      UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = hole;
  mp.length = len;
  mp.flags = UCP_MEM_MAP_ALLOCATE | UCP_MEM_MAP_FIXED;
  ucp_mem_h mh = nullptr;
  ASSERT_EQ(ucp_mem_map(ctx, &mp, &mh), UCS_OK);
  ucp_mem_attr_t ma{};
  ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  ASSERT_EQ(ucp_mem_query(mh, &ma), UCS_OK);
  EXPECT_EQ(ma.address, hole) << "UCP_MEM_MAP_FIXED: at the address asked for";
  memset(ma.address, 0x5a, len);
  ucp_mem_advise_params_t ap{};
  ap.field_mask =
      UCP_MEM_ADVISE_PARAM_FIELD_ADDRESS | UCP_MEM_ADVISE_PARAM_FIELD_LENGTH | UCP_MEM_ADVISE_PARAM_FIELD_ADVICE;
  ap.address = static_cast<char*>(ma.address) + 4096;
  ap.length = 8192;
  ap.advice = UCP_MADV_WILLNEED;
  EXPECT_EQ(ucp_mem_advise(ctx, mh, &ap), UCS_OK);
  ap.advice = UCP_MADV_NORMAL;
  EXPECT_EQ(ucp_mem_advise(ctx, mh, &ap), UCS_OK);
  ap.length = len;  // runs past the end
  EXPECT_EQ(ucp_mem_advise(ctx, mh, &ap), UCS_ERR_INVALID_PARAM);
  EXPECT_EQ(static_cast<unsigned char*>(ma.address)[len - 1], 0x5a) << "advice changes no data";
  EXPECT_EQ(ucp_mem_unmap(ctx, mh), UCS_OK);
  char* text = nullptr;
  size_t tlen = 0;
  FILE* f = open_memstream(&text, &tlen);
  ucp_mem_print_info("1m", ctx, f);
  fclose(f);
  EXPECT_NE(strstr(text, "1m bytes"), nullptr) << text;
  free(text);
  ucp_worker_destroy(w);
  close(ep_fd);
  ucp_cleanup(ctx);
  EXPECT_GT(g_req_inits - inits_before, 0);
  EXPECT_EQ(g_req_cleanups - cleanups_before, g_req_inits - inits_before)
      << "request_cleanup once for each request request_init made";

  // libucm: no native hooks; events the application reports itself reach
  // the handlers of their type, in priority order, until unset.
  ucm_seen seen;
  ucm_global_config_t gc{};
  ucm_set_global_opts(&gc);
  EXPECT_EQ(ucm_set_event_handler(0, 0, ucm_cb, &seen), UCS_ERR_INVALID_PARAM);
  ASSERT_EQ(ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, ucm_cb, &seen), UCS_OK);
  EXPECT_EQ(ucm_test_events(UCM_EVENT_VM_UNMAPPED), UCS_ERR_UNSUPPORTED);
  EXPECT_EQ(ucm_test_external_events(UCM_EVENT_VM_UNMAPPED), UCS_ERR_UNSUPPORTED);
  ucm_vm_munmap(&seen, 100);
  EXPECT_EQ(seen.calls, 0) << "not an external event yet";
  ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
  EXPECT_EQ(ucm_test_external_events(UCM_EVENT_VM_UNMAPPED), UCS_OK);
  EXPECT_EQ(ucm_test_events(UCM_EVENT_VM_UNMAPPED), UCS_OK);
  ucm_vm_munmap(&seen, 100);
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.addr, &seen);
  EXPECT_EQ(seen.size, 100u);
  ucm_vm_mmap(&seen, 200);  // mapped events: neither external nor handled
  EXPECT_EQ(seen.calls, 1);
  ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, ucm_cb, &seen);
  ucm_vm_munmap(&seen, 100);
  EXPECT_EQ(seen.calls, 1) << "unset";
  ucm_unset_external_event(UCM_EVENT_VM_UNMAPPED);
  EXPECT_EQ(ucm_test_external_events(UCM_EVENT_VM_UNMAPPED), UCS_ERR_UNSUPPORTED);
}

// Endpoint names, the old close/flush/disconnect calls, receive info,
// the old receive calls and their tests, requests made by
// ucp_request_alloc carrying an operation.
TEST(ucp, endpoint_and_request_calls) {
  two([](side& s) {
    s.init();
    s.connect();
    // UCP_EP_PARAM_FIELD_NAME: three more endpoints to the peer, named.
    ucp_address_t* mine = nullptr;
    size_t ml = 0;
    CK(ucp_worker_get_address(s.w, &mine, &ml) == UCS_OK);
    uint64_t l = ml;
    s.put(&l, 8);
    s.put(mine, ml);
    ucp_worker_release_address(s.w, mine);
    uint64_t pl = 0;
    CK(s.get(&pl, 8));
    std::vector<char> peer(pl);
    CK(s.get(peer.data(), pl));
    ucp_ep_h extra[3] = {};
    const char* names[3] = {"close-nb", "disconnect-nb", "destroyed"};
    for (int i = 0; i < 3; ++i) {
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_NAME;
      ep.address = reinterpret_cast<ucp_address_t*>(peer.data());
      ep.name = names[i];
      CK(ucp_ep_create(s.w, &ep, &extra[i]) == UCS_OK);
      ucp_ep_attr_t a{};
      a.field_mask = UCP_EP_ATTR_FIELD_NAME;
      CK(ucp_ep_query(extra[i], &a) == UCS_OK);
      CK(!strcmp(a.name, names[i]));
    }
    if (s.rank == 0) {
      // A put, then the old flushes with their callbacks.
      uint64_t v = 77;
      void* local = nullptr;
      remote_region rr = share(s, &local, 4096, true);
      CK(ucp_put_nbi(s.ep, &v, 8, rr.addr, rr.rkey) >= UCS_OK);
      void* fr = ucp_ep_flush_nb(s.ep, 0, send_nb_cb);
      if (UCS_PTR_IS_PTR(fr)) {
        CK(s.wait(fr, 10) == UCS_OK);
      } else {
        CK(fr == nullptr);
      }
      CK(ucp_put_nbi(s.ep, &v, 8, rr.addr + 8, rr.rkey) >= UCS_OK);
      void* wr = ucp_worker_flush_nb(s.w, 0, send_nb_cb);
      if (UCS_PTR_IS_PTR(wr)) CK(s.wait(wr, 10) == UCS_OK);
      CK(ucp_put_nbi(s.ep, &v, 8, rr.addr + 16, rr.rkey) >= UCS_OK);
      ucp_request_param_t np = send_param();
      void* nr = ucp_worker_flush_nbx(s.w, &np);
      if (UCS_PTR_IS_PTR(nr)) CK(s.wait(nr, 10) == UCS_OK);
      s.barrier();  // the peer reads the three words
      ucp_rkey_destroy(rr.rkey);
      CK(ucp_mem_unmap(s.ctx, rr.memh) == UCS_OK);
      // Tag messages for the peer's receive calls.
      for (uint64_t t = 1; t <= 3; ++t) {
        uint64_t x = 1000 + t;
        CK(s.wait(ucp_tag_send_nbx(s.ep, &x, 8, t, nullptr)) == UCS_OK);
      }
      const char stream_bytes[] = "stream-nb";
      CK(s.wait(ucp_stream_send_nbx(s.ep, stream_bytes, sizeof stream_bytes, nullptr)) == UCS_OK);
      s.barrier();
    } else {
      void* local = nullptr;
      remote_region rr = share(s, &local, 4096, true);
      s.barrier();
      auto* words = static_cast<uint64_t*>(local);
      CK(words[0] == 77 && words[1] == 77 && words[2] == 77);
      ucp_rkey_destroy(rr.rkey);
      CK(ucp_mem_unmap(s.ctx, rr.memh) == UCS_OK);
      // UCP_OP_ATTR_FIELD_RECV_INFO: the sender's tag, filled at completion.
      uint64_t x = 0;
      ucp_tag_recv_info_t info{};
      ucp_request_param_t rp{};
      rp.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
      rp.recv_info.tag_info = &info;
      void* r1 = ucp_tag_recv_nbx(s.w, &x, 8, 1, ~0ull, &rp);
      CK(!UCS_PTR_IS_ERR(r1));
      if (UCS_PTR_IS_PTR(r1)) CK(s.wait(r1) == UCS_OK);
      CK(x == 1001 && info.sender_tag == 1 && info.length == 8);
      // ucp_tag_recv_nb (old API) and ucp_tag_recv_request_test.
      void* r2 = ucp_tag_recv_nb(s.w, &x, 8, ucp_dt_make_contig(1), 2, ~0ull, recv_nb_cb);
      CK(UCS_PTR_IS_PTR(r2));
      ucs_status_t st = UCS_INPROGRESS;
      ucp_tag_recv_info_t info2{};
      for (double t0 = now(); st == UCS_INPROGRESS && now() - t0 < 10;) {
        s.progress();
        st = ucp_tag_recv_request_test(r2, &info2);
      }
      CK(st == UCS_OK && info2.sender_tag == 2 && info2.length == 8 && x == 1002);
      CK(ucp_request_is_completed(r2));
      ucp_request_release(r2);
      // A request from ucp_request_alloc carries a receive, then is freed.
      void* mine_req = ucp_request_alloc(s.w);
      CK(mine_req != nullptr);
      ucp_request_param_t ap = recv_param();
      ap.op_attr_mask |= UCP_OP_ATTR_FIELD_REQUEST;
      ap.request = mine_req;
      void* r3 = ucp_tag_recv_nbx(s.w, &x, 8, 3, ~0ull, &ap);
      CK(r3 == mine_req);
      for (double t0 = now(); !ucp_request_is_completed(mine_req) && now() - t0 < 10;) s.progress();
      CK(ucp_request_check_status(mine_req) == UCS_OK && x == 1003);
      CK(static_cast<app_req*>(mine_req)->done == 1 && static_cast<app_req*>(mine_req)->tag == 3);
      ucp_request_free(mine_req);
      // ucp_stream_recv_nb (old API) and ucp_stream_recv_request_test.
      char sb[16] = {};
      size_t got = 0;
      void* r4 = ucp_stream_recv_nb(s.ep, sb, sizeof "stream-nb", ucp_dt_make_contig(1), stream_nb_cb, &got,
                                    UCP_STREAM_RECV_FLAG_WAITALL);
      CK(!UCS_PTR_IS_ERR(r4));
      if (UCS_PTR_IS_PTR(r4)) {
        size_t len = 0;
        st = UCS_INPROGRESS;
        for (double t0 = now(); st == UCS_INPROGRESS && now() - t0 < 10;) {
          s.progress();
          st = ucp_stream_recv_request_test(r4, &len);
        }
        CK(st == UCS_OK && len == sizeof "stream-nb");
        ucp_request_free(r4);
      } else {
        CK(got == sizeof "stream-nb");
      }
      CK(!strcmp(sb, "stream-nb"));
      s.barrier();
    }
    // The old ways to close: ucp_ep_close_nb, ucp_disconnect_nb, ucp_ep_destroy.
    CK(UCS_PTR_IS_ERR(ucp_ep_close_nb(extra[0], 77)));  // no such mode
    void* c0 = ucp_ep_close_nb(extra[0], UCP_EP_CLOSE_MODE_FLUSH);
    if (UCS_PTR_IS_PTR(c0)) CK(s.wait(c0) == UCS_OK);
    else CK(c0 == nullptr);
    void* c1 = ucp_disconnect_nb(extra[1]);
    if (UCS_PTR_IS_PTR(c1)) CK(s.wait(c1) == UCS_OK);
    else CK(c1 == nullptr);
    ucp_ep_destroy(extra[2]);
    s.barrier();
    s.fini();
  });
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
