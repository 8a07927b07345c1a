// SPDX-License-Identifier: BSD-3-Clause
/*
 * MPI one-sided accumulate for the UCP face's comparison: rank 0 locks the
 * window of TARGET (0: itself, 1: the other rank) exclusively, accumulates
 * SIZE bytes into it (MPI_BXOR of MPI_INT) and unlocks, ITERS times. MPICH's
 * ch4:ucx sends each accumulate as one active message (eager up to the
 * face's frame size, else rendezvous), as the MPICH test suite's rma tests
 * do. Run by Debian's MPICH over real UCX and over weft
 * (LD_LIBRARY_PATH=build/lib).
 *   mpiexec.mpich -n 2 mpi-accumulate [SIZE [TARGET [ITERS]]]
 * Prints "mpi_accumulate SIZE TARGET LAT us_per_op", after checking the
 * target's window: each accumulate flips every bit of 0x01 bytes.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_util.h"

int main(int argc, char** argv) {
  static const char usage[] =
      "usage: mpiexec.mpich -n 2 mpi-accumulate [SIZE [TARGET [ITERS]]]\n"
      "Rank 0 locks TARGET's window (0: its own, 1: rank 1's; default 1), accumulates SIZE\n"
      "bytes (MPI_BXOR of MPI_INT, a multiple of 4; default 16384) and unlocks, ITERS times\n"
      "(default 20000, or 500 above 256 KiB), checks the window and prints\n"
      "  mpi_accumulate SIZE TARGET LAT us_per_op\n"
      "Over real UCX by default, over weft's UCP face with LD_LIBRARY_PATH=build/lib.\n";
  long size = 16384, target = 1, iters = 0;
  if (tool_help_asked(argc, argv)) tool_help(usage);
  if (argc > 4) tool_usage_error("mpi-accumulate", "too many arguments");
  if (argc > 1 && (!tool_parse_long(argv[1], 4, 1L << 28, &size) || size % 4))
    tool_usage_error("mpi-accumulate", "SIZE must be a multiple of 4 bytes (4 to 2^28), not '%s'", argv[1]);
  if (argc > 2 && !tool_parse_long(argv[2], 0, 1, &target))
    tool_usage_error("mpi-accumulate", "TARGET must be 0 or 1, not '%s'", argv[2]);
  if (argc > 3 && !tool_parse_long(argv[3], 1, 1L << 30, &iters))
    tool_usage_error("mpi-accumulate", "ITERS must be a positive number, not '%s'", argv[3]);
  if (!iters) iters = size > 262144 ? 500 : 20000;
  MPI_Init(&argc, &argv);
  int rank, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (np < 2) {
    if (rank == 0) fprintf(stderr, "mpi-accumulate: needs 2 ranks (mpiexec -n 2)\n");
    MPI_Finalize();
    return 2;
  }
  unsigned char *buf, *win_buf;
  MPI_Win win;
  MPI_Alloc_mem(size, MPI_INFO_NULL, &buf);
  MPI_Alloc_mem(size, MPI_INFO_NULL, &win_buf);
  memset(buf, 0xff, (size_t)size);
  memset(win_buf, 0x01, (size_t)size);
  MPI_Win_create(win_buf, size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  long warm = iters / 10 + 1;
  double t = 0;
  if (rank == 0) {
    for (long i = -warm; i < iters; i++) {
      if (i == 0) t = MPI_Wtime();
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, (int)target, 0, win);
      MPI_Accumulate(buf, (int)(size / 4), MPI_INT, (int)target, 0, (int)(size / 4), MPI_INT, MPI_BXOR, win);
      MPI_Win_unlock((int)target, win);
    }
    t = (MPI_Wtime() - t) / (double)iters;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int bad = 0;
  if (rank == target) {
    unsigned char want = (warm + iters) % 2 ? 0xfe : 0x01;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
    for (long i = 0; i < size; i++) bad += win_buf[i] != want;
    MPI_Win_unlock(rank, win);
  }
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (bad)
      fprintf(stderr, "mpi-accumulate: %d bytes of the window are wrong\n", bad);
    else
      printf("mpi_accumulate %ld %ld %.3f us_per_op\n", size, target, t * 1e6);
  }
  MPI_Win_free(&win);
  MPI_Free_mem(win_buf);
  MPI_Free_mem(buf);
  MPI_Finalize();
  return bad ? 1 : 0;
}
