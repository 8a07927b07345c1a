/*
 * MPI ping-pong for the UCP face's comparison: rank 0 and rank 1 exchange
 * SIZE-byte messages (MPI_Send/MPI_Recv). Run by Debian's MPICH (ch4:ucx)
 * over real UCX and over weft (LD_LIBRARY_PATH=build/lib).
 *   mpiexec.mpich -n 2 mpi_pingpong [SIZE [ITERS]]
 * Prints "mpi_pingpong SIZE LAT us_oneway_median BW MB/s".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long size = argc > 1 ? atol(argv[1]) : 8;
  long iters = argc > 2 ? atol(argv[2]) : (size > 65536 ? 2000 : 100000);
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
