// SPDX-License-Identifier: BSD-3-Clause
/*
 * MPI ping-pong for the UCP face's comparison: rank 0 and rank 1 exchange
 * SIZE-byte messages (MPI_Send/MPI_Recv). Run by Debian's MPICH (ch4:ucx)
 * over real UCX and over weft (LD_LIBRARY_PATH=build/lib).
 *   mpiexec.mpich -n 2 mpi-pingpong [SIZE [ITERS]]
 * Prints "mpi_pingpong SIZE LAT us_oneway_median BW MB/s".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_util.h"

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  static const char usage[] =
      "usage: mpiexec.mpich -n 2 mpi-pingpong [SIZE [ITERS]]\n"
      "Ranks 0 and 1 exchange SIZE-byte messages (MPI_Send/MPI_Recv; default 8 bytes, ITERS\n"
      "round trips: 100000, or 2000 above 64 KiB) and rank 0 prints\n"
      "  mpi_pingpong SIZE LAT us_oneway_median BW MB/s\n"
      "Over real UCX by default, over weft's UCP face with LD_LIBRARY_PATH=build/lib.\n";
  /* Arguments are checked before MPI_Init: --help and mistakes need no MPI. */
  long size = 8, iters = 0;
  /* One source, two programs (mpi-pingpong, mpi-pingpong-openmpi): errors name the one run. */
  const char* self = strrchr(argv[0], '/');
  self = self ? self + 1 : argv[0];
  if (tool_help_asked(argc, argv)) tool_help(usage);
  if (argc > 3) tool_usage_error(self, "too many arguments");
  if (argc > 1 && !tool_parse_long(argv[1], 0, 1L << 30, &size))
    tool_usage_error(self, "SIZE must be a number of bytes (0 to 2^30), not '%s'", argv[1]);
  if (argc > 2 && !tool_parse_long(argv[2], 1, 1L << 30, &iters))
    tool_usage_error(self, "ITERS must be a positive number, not '%s'", argv[2]);
  if (!iters) iters = size > 65536 ? 2000 : 100000;
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char* buf = malloc(size > 0 ? (size_t)size : 1);
  memset(buf, rank, size > 0 ? (size_t)size : 1);
  double* rtt = malloc(sizeof(double) * (size_t)iters);
  long warm = iters / 10;
  MPI_Barrier(MPI_COMM_WORLD);
  double total = 0;
  for (long i = -warm; i < iters; i++) {
    double t0 = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
      MPI_Recv(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
    }
    if (i >= 0) {
      rtt[i] = MPI_Wtime() - t0;
      total += rtt[i];
    }
  }
  if (rank == 0) {
    qsort(rtt, (size_t)iters, sizeof(double), cmp);
    printf("mpi_pingpong %ld %.3f us_oneway_median %.1f MB/s\n", size, rtt[iters / 2] / 2 * 1e6,
           2.0 * size * iters / total / 1e6);
  }
  free(buf);
  free(rtt);
  MPI_Finalize();
  return 0;
}
