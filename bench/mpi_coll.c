// SPDX-License-Identifier: BSD-3-Clause
/*
 * MPI collectives for weft-perf's comparison (bench/coll_compare.sh): the
 * same measurements as weft-perf's barrier_lat, allreduce_lat and
 * allreduce_bw, made with MPI_Barrier and MPI_Allreduce (MPI_SUM on
 * MPI_UINT64_T, the datatype and operation weft-perf uses), so that the MPIs
 * of this machine stand beside weft's collectives on the same processes.
 * Built twice, once per MPI: mpi-coll-mpich (mpicc.mpich) and
 * mpi-coll-openmpi (mpicc.openmpi).
 *   mpiexec.mpich -n 2 mpi-coll-mpich [-t barrier|allreduce] [-s SIZE] [-n ITERS]
 * Rank 0 prints one line per measurement:
 *   mpi_coll TEST SIZE LAT_us_median BW_MBps ITERS
 * (the latency is the median time of one operation; the bandwidth is SIZE
 * over it, 0 for the barrier).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_util.h"

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static const char usage[] =
    "usage: mpiexec -n N mpi-coll-<mpi> [-t barrier|allreduce] [-s SIZE] [-n ITERS]\n"
    "Times MPI_Barrier or MPI_Allreduce (MPI_SUM of SIZE/8 uint64 values; SIZE a\n"
    "multiple of 8, default 8) on MPI_COMM_WORLD, ITERS times after a tenth as many\n"
    "unmeasured ones (default 100000 at 8 bytes, fewer for larger sizes). Without\n"
    "-t it measures the three of weft-perf's collective tests in turn: barrier,\n"
    "allreduce of 8 bytes, allreduce of 1 MiB. Rank 0 prints\n"
    "  mpi_coll TEST SIZE LAT_us_median BW_MBps ITERS\n"
    "per measurement, and checks every allreduce result.\n";

/* One measurement: returns 0, or 1 when a result was wrong. */
static int run(const char* test, long size, long iters, int rank, int nranks) {
  int allreduce = strcmp(test, "allreduce") == 0;
  size_t count = allreduce ? (size_t)size / 8 : 0;
  uint64_t* in = malloc(count ? count * 8 : 8);
  uint64_t* out = malloc(count ? count * 8 : 8);
  double* t = malloc(sizeof(double) * (size_t)iters);
  int bad = 0;
  if (!in || !out || !t) {
    fprintf(stderr, "mpi-coll: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t j = 0; j < count; j++) in[j] = (uint64_t)rank * 1000003u + j;
  long warm = iters / 10 + 1;
  MPI_Barrier(MPI_COMM_WORLD);
  for (long i = -warm; i < iters; i++) {
    double t0 = MPI_Wtime();
    if (allreduce)
      MPI_Allreduce(in, out, (int)count, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    else
      MPI_Barrier(MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    if (i >= 0) t[i] = t1 - t0;
  }
  if (allreduce) {
    /* sum over ranks of rank * 1000003 + j */
    uint64_t base = (uint64_t)nranks * (uint64_t)(nranks - 1) / 2 * 1000003u;
    for (size_t j = 0; j < count && !bad; j++)
      if (out[j] != base + (uint64_t)nranks * j) bad = 1;
  }
  if (rank == 0) {
    qsort(t, (size_t)iters, sizeof(double), cmp);
    double med = t[iters / 2];
    printf("mpi_coll %s %ld %.3f %.1f %ld\n", test, allreduce ? size : 0L, med * 1e6,
           allreduce ? (double)size / med / 1e6 : 0.0, iters);
    fflush(stdout);
    if (bad) fprintf(stderr, "mpi-coll: wrong allreduce result\n");
  }
  free(in);
  free(out);
  free(t);
  return bad;
}

int main(int argc, char** argv) {
  const char* test = NULL;
  long size = 8, iters = 0;
  int size_given = 0;
  /* One source, two programs (mpi-coll-mpich, mpi-coll-openmpi): errors
     name the one run. Arguments are checked before MPI_Init: --help and
     mistakes need no MPI. */
  const char* self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  if (tool_help_asked(argc, argv)) tool_help(usage);
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) tool_usage_error(self, "option %s needs an argument or is unknown", argv[i]);
    if (!strcmp(argv[i], "-t")) {
      test = argv[++i];
      if (strcmp(test, "barrier") && strcmp(test, "allreduce"))
        tool_usage_error(self, "-t takes barrier or allreduce, not '%s'", test);
    } else if (!strcmp(argv[i], "-s")) {
      if (!tool_parse_long(argv[++i], 8, 1L << 30, &size) || size % 8)
        tool_usage_error(self, "SIZE must be a multiple of 8 bytes (8 to 2^30), not '%s'", argv[i]);
      size_given = 1;
    } else if (!strcmp(argv[i], "-n")) {
      if (!tool_parse_long(argv[++i], 1, 1L << 30, &iters))
        tool_usage_error(self, "ITERS must be a positive number, not '%s'", argv[i]);
    } else {
      tool_usage_error(self, "unknown option '%s'", argv[i]);
    }
  }
  if (size_given && test && !strcmp(test, "barrier"))
    tool_usage_error(self, "-s applies to allreduce only");
  MPI_Init(&argc, &argv);
  int rank, nranks, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (test) {
    long n = iters ? iters : (size > 65536 ? 2000 : 100000);
    bad |= run(test, size, n, rank, nranks);
  } else {
    bad |= run("barrier", 0, iters ? iters : 100000, rank, nranks);
    bad |= run("allreduce", 8, iters ? iters : 100000, rank, nranks);
    bad |= run("allreduce", 1L << 20, iters ? iters : 2000, rank, nranks);
  }
  MPI_Finalize();
  return bad;
}
