// SPDX-License-Identifier: BSD-3-Clause
/*
 * An MPI program of weft's own, run by Debian's MPICH (ch4:ucx) and by Open
 * MPI (pml ucx, osc ucx) with LD_LIBRARY_PATH pointing at weft: every
 * message is checked byte for byte. Sections: point-to-point at sizes 0 to
 * 16 MiB, any-source and probes (Probe, Iprobe, Mprobe/Mrecv), synchronous
 * sends, cancel, a non-contiguous datatype, collectives, one-sided
 * (put, get, accumulate, get_accumulate, fetch-and-op, compare-and-swap under
 * fence and passive-target locks).
 *
 * Usage: mpi_suite [section ...]  (no argument: all; names as printed)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static int failures;

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
      failures++;                                                         \
    }                                                                     \
  } while (0)

static unsigned char pattern(size_t i, int src, int salt) {
  return (unsigned char)(i * 31 + src * 7 + salt);
}

static void fill(unsigned char* b, size_t n, int src, int salt) {
  for (size_t i = 0; i < n; i++) b[i] = pattern(i, src, salt);
}

static size_t check_buf(const unsigned char* b, size_t n, int src, int salt) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != pattern(i, src, salt)) return i + 1;
  return 0;
}

/* Every rank sends to rank+1 and receives from rank-1, every size. */
static void pt2pt(void) {
  static const size_t sizes[] = {0,    1,     7,     8,      64,      1000,    4096,
                                 8192, 65536, 65537, 262144, 1 << 20, 3000001, 16 << 20};
  int to = (rank + 1) % size, from = (rank + size - 1) % size;
  unsigned char* s = malloc(16 << 20);
  unsigned char* r = malloc((16 << 20) + 64);
  for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    fill(s, n, rank, (int)k);
    memset(r, 0xee, n + 64);
    MPI_Request rq[2];
    MPI_Status st;
    MPI_Irecv(r, (int)n, MPI_BYTE, from, 100 + (int)k, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(s, (int)n, MPI_BYTE, to, 100 + (int)k, MPI_COMM_WORLD, &rq[1]);
    MPI_Wait(&rq[0], &st);
    MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
    int cnt;
    MPI_Get_count(&st, MPI_BYTE, &cnt);
    CHECK((size_t)cnt == n, "size %zu: count %d", n, cnt);
    size_t bad = check_buf(r, n, from, (int)k);
    CHECK(!bad, "size %zu: byte %zu wrong", n, bad - 1);
    CHECK(r[n] == 0xee, "size %zu: written past the end", n);
  }
  /* Blocking, in both directions at once through Sendrecv. */
  fill(s, 1 << 20, rank, 99);
  MPI_Sendrecv(s, 1 << 20, MPI_BYTE, to, 7, r, 1 << 20, MPI_BYTE, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(!check_buf(r, 1 << 20, from, 99), "sendrecv data");
  /* Many small messages in flight, order kept per pair. */
  enum { N = 200 };
  MPI_Request rq[2 * N];
  int vals[N], outs[N];
  for (int i = 0; i < N; i++) {
    outs[i] = rank * 100000 + i;
    MPI_Irecv(&vals[i], 1, MPI_INT, from, 9, MPI_COMM_WORLD, &rq[i]);
  }
  for (int i = 0; i < N; i++) MPI_Isend(&outs[i], 1, MPI_INT, to, 9, MPI_COMM_WORLD, &rq[N + i]);
  MPI_Waitall(2 * N, rq, MPI_STATUSES_IGNORE);
  for (int i = 0; i < N; i++) CHECK(vals[i] == from * 100000 + i, "order: message %d is %d", i, vals[i]);
  free(s);
  free(r);
}

/* Rank 0 receives from everyone with MPI_ANY_SOURCE and probes. */
static void anysource_probe(void) {
  unsigned char buf[5000];
  if (rank == 0) {
    int seen = 0;
    for (int i = 1; i < size; i++) {
      MPI_Status st;
      MPI_Probe(MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, &st);
      int cnt;
      MPI_Get_count(&st, MPI_BYTE, &cnt);
      CHECK(cnt == 1000 + st.MPI_SOURCE, "probe count %d from %d", cnt, st.MPI_SOURCE);
      MPI_Recv(buf, sizeof buf, MPI_BYTE, st.MPI_SOURCE, 21, MPI_COMM_WORLD, &st);
      CHECK(!check_buf(buf, (size_t)cnt, st.MPI_SOURCE, 21), "probe data from %d", st.MPI_SOURCE);
      seen |= 1 << st.MPI_SOURCE;
    }
    CHECK(seen == ((1 << size) - 2), "sources seen %x", seen);
    /* Iprobe until there, then Mprobe/Mrecv, then ANY_SOURCE+ANY_TAG recv. */
    for (int i = 1; i < size; i++) {
      int flag = 0;
      MPI_Status st;
      while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, 22, MPI_COMM_WORLD, &flag, &st);
      MPI_Message m;
      MPI_Mprobe(st.MPI_SOURCE, 22, MPI_COMM_WORLD, &m, &st);
      int cnt;
      MPI_Get_count(&st, MPI_BYTE, &cnt);
      MPI_Mrecv(buf, cnt, MPI_BYTE, &m, &st);
      CHECK(cnt == 3000 && !check_buf(buf, 3000, st.MPI_SOURCE, 22), "mrecv from %d", st.MPI_SOURCE);
    }
    for (int i = 1; i < size; i++) {
      MPI_Status st;
      MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      int cnt;
      MPI_Get_count(&st, MPI_BYTE, &cnt);
      CHECK(st.MPI_TAG == 30 + st.MPI_SOURCE && cnt == 10 && !check_buf(buf, 10, st.MPI_SOURCE, 23),
            "any tag: tag %d from %d", st.MPI_TAG, st.MPI_SOURCE);
    }
  } else {
    fill(buf, 1000 + (size_t)rank, rank, 21);
    MPI_Send(buf, 1000 + rank, MPI_BYTE, 0, 21, MPI_COMM_WORLD);
    fill(buf, 3000, rank, 22);
    MPI_Send(buf, 3000, MPI_BYTE, 0, 22, MPI_COMM_WORLD);
    fill(buf, 10, rank, 23);
    MPI_Send(buf, 10, MPI_BYTE, 0, 30 + rank, MPI_COMM_WORLD);
  }
}

/* Synchronous sends, small and large: Ssend, Issend; and Issend is not
 * complete before the receiver posted its receive. */
static void sync_send(void) {
  int to = (rank + 1) % size, from = (rank + size - 1) % size;
  static const size_t sizes[] = {0, 8, 5000, 1 << 20};
  unsigned char* s = malloc(1 << 20);
  unsigned char* r = malloc(1 << 20);
  for (unsigned k = 0; k < 4; k++) {
    size_t n = sizes[k];
    fill(s, n, rank, 40 + (int)k);
    MPI_Request rq;
    MPI_Irecv(r, (int)n, MPI_BYTE, from, 40, MPI_COMM_WORLD, &rq);
    if (k & 1) {
      MPI_Request sq;
      MPI_Issend(s, (int)n, MPI_BYTE, to, 40, MPI_COMM_WORLD, &sq);
      MPI_Wait(&sq, MPI_STATUS_IGNORE);
    } else {
      MPI_Ssend(s, (int)n, MPI_BYTE, to, 40, MPI_COMM_WORLD);
    }
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    CHECK(!check_buf(r, n, from, 40 + (int)k), "ssend size %zu", n);
  }
  /* Rank 0 Issends to 1, which posts its receive only after a barrier: the
   * send must still be incomplete before it. */
  if (size >= 2) {
    int x = 77, y = 0, done = 1;
    MPI_Request sq = MPI_REQUEST_NULL;
    if (rank == 0) {
      MPI_Issend(&x, 1, MPI_INT, 1, 41, MPI_COMM_WORLD, &sq);
      for (int i = 0; i < 1000; i++) MPI_Test(&sq, &done, MPI_STATUS_IGNORE);
      CHECK(!done, "Issend completed before the receive was posted");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) MPI_Recv(&y, 1, MPI_INT, 0, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0 && !done) MPI_Wait(&sq, MPI_STATUS_IGNORE);
    if (rank == 1) CHECK(y == 77, "issend value %d", y);
  }
  free(s);
  free(r);
}

/* A posted receive that nobody matches is cancelled. */
static void cancel(void) {
  int v = 0;
  MPI_Request rq;
  MPI_Status st;
  MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &rq);
  MPI_Cancel(&rq);
  MPI_Wait(&rq, &st);
  int flag = 0;
  MPI_Test_cancelled(&st, &flag);
  CHECK(flag, "receive not cancelled");
  /* Communication still works after it. */
  int to = (rank + 1) % size, from = (rank + size - 1) % size, x = rank, y = -1;
  MPI_Sendrecv(&x, 1, MPI_INT, to, 998, &y, 1, MPI_INT, from, 998, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  CHECK(y == from, "after cancel: %d", y);
}

/* A strided vector type: non-contiguous on both sides. */
static void datatype(void) {
  int to = (rank + 1) % size, from = (rank + size - 1) % size;
  enum { COUNT = 1000, BLOCK = 3, STRIDE = 5 };
  MPI_Datatype vec;
  MPI_Type_vector(COUNT, BLOCK, STRIDE, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  int* s = malloc(sizeof(int) * COUNT * STRIDE);
  int* r = malloc(sizeof(int) * COUNT * STRIDE);
  for (int i = 0; i < COUNT * STRIDE; i++) {
    s[i] = rank * 1000000 + i;
    r[i] = -1;
  }
  MPI_Sendrecv(s, 1, vec, to, 50, r, 1, vec, from, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int bad = 0;
  for (int i = 0; i < COUNT * STRIDE; i++) {
    int in_block = (i % STRIDE) < BLOCK;
    int want = in_block ? from * 1000000 + i : -1;
    if (r[i] != want) bad++;
  }
  CHECK(!bad, "vector: %d wrong elements", bad);
  MPI_Type_free(&vec);
  free(s);
  free(r);
}

static void collectives(void) {
  int v = rank + 1, sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sum == size * (size + 1) / 2, "allreduce %d", sum);
  int root_sum = 0;
  MPI_Reduce(&v, &root_sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) CHECK(root_sum == sum, "reduce %d", root_sum);
  enum { BN = 300000 };
  unsigned char* b = malloc(BN);
  if (rank == 0) fill(b, BN, 0, 60);
  MPI_Bcast(b, BN, MPI_BYTE, 0, MPI_COMM_WORLD);
  CHECK(!check_buf(b, BN, 0, 60), "bcast");
  int* all = malloc(sizeof(int) * (size_t)size);
  MPI_Allgather(&v, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
  for (int i = 0; i < size; i++) CHECK(all[i] == i + 1, "allgather[%d]=%d", i, all[i]);
  int* sa = malloc(sizeof(int) * (size_t)size * 1000);
  int* ra = malloc(sizeof(int) * (size_t)size * 1000);
  for (int i = 0; i < size * 1000; i++) sa[i] = rank * 1000000 + i;
  MPI_Alltoall(sa, 1000, MPI_INT, ra, 1000, MPI_INT, MPI_COMM_WORLD);
  int bad = 0;
  for (int p = 0; p < size; p++)
    for (int i = 0; i < 1000; i++)
      if (ra[p * 1000 + i] != p * 1000000 + rank * 1000 + i) bad++;
  CHECK(!bad, "alltoall: %d wrong", bad);
  MPI_Gather(&v, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int i = 0; i < size; i++) CHECK(all[i] == i + 1, "gather[%d]", i);
  int got = -1;
  for (int i = 0; i < size; i++) all[i] = 100 + i;
  MPI_Scatter(all, 1, MPI_INT, &got, 1, MPI_INT, 0, MPI_COMM_WORLD);
  CHECK(got == 100 + rank, "scatter %d", got);
  MPI_Barrier(MPI_COMM_WORLD);
  free(b);
  free(all);
  free(sa);
  free(ra);
}

/* One-sided: every rank has a window of N 64-bit integers. */
static void one_sided_on(MPI_Win win, int64_t* base, const char* what) {
  enum { N = 4096 };
  int to = (rank + 1) % size, from = (rank + size - 1) % size;
  /* Put under fence. */
  int64_t* src = malloc(sizeof(int64_t) * N);
  for (int i = 0; i < N; i++) src[i] = (int64_t)rank * 1000000 + i;
  MPI_Win_fence(0, win);
  MPI_Put(src, N, MPI_INT64_T, to, 0, N, MPI_INT64_T, win);
  MPI_Win_fence(0, win);
  int bad = 0;
  for (int i = 0; i < N; i++)
    if (base[i] != (int64_t)from * 1000000 + i) bad++;
  CHECK(!bad, "%s put: %d wrong", what, bad);
  /* Get under fence. */
  int64_t* dst = malloc(sizeof(int64_t) * N);
  MPI_Get(dst, N, MPI_INT64_T, to, 0, N, MPI_INT64_T, win);
  MPI_Win_fence(0, win);
  bad = 0;
  for (int i = 0; i < N; i++)
    if (dst[i] != (int64_t)rank * 1000000 + i) bad++;
  CHECK(!bad, "%s get: %d wrong", what, bad);
  /* Everybody accumulates into element 0 of rank 0's window. */
  for (int i = 0; i < N; i++) base[i] = 0;
  MPI_Win_fence(0, win);
  int64_t one = rank + 1;
  MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, win);
  MPI_Win_fence(0, win);
  if (rank == 0) CHECK(base[0] == size * (size + 1) / 2, "%s accumulate: %lld", what, (long long)base[0]);
  /* Passive target: fetch-and-op and compare-and-swap on rank 0's element 1. */
  MPI_Win_fence(0, win);
  MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
  int64_t add = 1, old = -1;
  MPI_Fetch_and_op(&add, &old, MPI_INT64_T, 0, 1, MPI_SUM, win);
  MPI_Win_unlock(0, win);
  CHECK(old >= 0 && old < size, "%s fetch_and_op old %lld", what, (long long)old);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Win_unlock(0, win);
    CHECK(base[1] == size, "%s fetch_and_op total %lld", what, (long long)base[1]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  /* Exactly one rank swaps element 2 from 0 to its rank+1. */
  MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
  int64_t cmp = 0, nv = rank + 1, res = -1;
  MPI_Compare_and_swap(&nv, &cmp, &res, MPI_INT64_T, 0, 2, win);
  MPI_Win_unlock(0, win);
  int won = res == 0, winners = 0;
  MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(winners == 1, "%s compare_and_swap winners %d", what, winners);
  /* Get_accumulate and a flush inside a lock_all epoch. */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_lock_all(0, win);
  int64_t inc = 10, prev = -1;
  MPI_Get_accumulate(&inc, 1, MPI_INT64_T, &prev, 1, MPI_INT64_T, to, 3, 1, MPI_INT64_T, MPI_SUM, win);
  MPI_Win_flush(to, win);
  MPI_Put(src, 100, MPI_INT64_T, to, 100, 100, MPI_INT64_T, win);
  MPI_Win_flush(to, win);
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(base[3] == 10, "%s get_accumulate: %lld", what, (long long)base[3]);
  bad = 0;
  for (int i = 0; i < 100; i++)
    if (base[100 + i] != (int64_t)from * 1000000 + i) bad++;
  CHECK(!bad, "%s flushed put: %d wrong", what, bad);
  free(src);
  free(dst);
}

static void one_sided(void) {
  enum { N = 4096 };
  int64_t* base = NULL;
  MPI_Win win;
  MPI_Win_allocate(N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  memset(base, 0, N * sizeof(int64_t));
  one_sided_on(win, base, "win_allocate");
  MPI_Win_free(&win);
  int64_t* mine = calloc(N, sizeof(int64_t));
  MPI_Win_create(mine, N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  one_sided_on(win, mine, "win_create");
  MPI_Win_free(&win);
  free(mine);
}

struct section {
  const char* name;
  void (*fn)(void);
};
static const struct section sections[] = {
    {"pt2pt", pt2pt},       {"anysource", anysource_probe}, {"sync", sync_send}, {"cancel", cancel},
    {"datatype", datatype}, {"collectives", collectives},   {"rma", one_sided},
};

/* Prints the UCX libraries this process mapped (rank 0), so that a test can
 * tell weft's from UCX's: with Open MPI they come in through its components. */
static void print_maps(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return;
  char line[4096], last[4096] = "";
  while (fgets(line, sizeof line, f)) {
    char* p = strchr(line, '/');
    if (!p || (!strstr(p, "/libucp.so") && !strstr(p, "/libucs.so") && !strstr(p, "/libuct.so") &&
               !strstr(p, "/libucm.so") && !strstr(p, "/libfabric.so")))
      continue;
    if (!strcmp(p, last)) continue;
    snprintf(last, sizeof last, "%s", p);
    printf("mapped: %s", p);
  }
  fclose(f);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0 && getenv("MPI_SUITE_MAPS")) print_maps();
  for (unsigned i = 0; i < sizeof sections / sizeof sections[0]; i++) {
    int run = argc < 2;
    for (int a = 1; a < argc; a++) run |= !strcmp(argv[a], sections[i].name);
    if (!run) continue;
    int before = failures;
    sections[i].fn();
    int local = failures - before, total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s %s (%d ranks)\n", total ? "FAIL" : "ok", sections[i].name, size);
    fflush(stdout);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return total ? 1 : 0;
}
