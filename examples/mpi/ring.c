// SPDX-License-Identifier: BSD-3-Clause
/*
 * ring: a token goes once around all ranks (MPI_Send / MPI_Recv), and rank 0
 * prints "ring of N ranks: the token came back". The README ("MPI") and
 * weft(1) run it with MPICH and with Open MPI over weft's UCP face.
 *
 *   mkdir -p build/examples
 *   mpicc.mpich   examples/mpi/ring.c -o build/examples/ring_mpich
 *   mpicc.openmpi examples/mpi/ring.c -o build/examples/ring_openmpi
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int rank, size, token = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    token = 42;
    MPI_Send(&token, 1, MPI_INT, 1 % size, 0, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("ring of %d ranks: the token %s\n", size, token == 42 ? "came back" : "came back wrong");
  } else {
    MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return token == 42 ? 0 : 1;
}
