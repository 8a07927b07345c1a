// SPDX-License-Identifier: BSD-3-Clause
// The MPI-1 calls MPI-3.0 removed, in terms of the calls that replaced them.
// MPICH's test suite (and its dtpools library) still calls them; Debian 12's
// Open MPI is built without --enable-mpi1-compatibility, so its library lacks
// them. mpich_testsuite.sh links this file into every program it builds for
// Open MPI, compiled with OMPI_OMIT_MPI1_COMPAT_DECLS=0 so that mpi.h
// declares the prototypes. MPI_LB and MPI_UB markers are not provided: a test
// that needs them does not build, and the runner reports it so.
#include <mpi.h>

int MPI_Address(void *location, MPI_Aint *address) { return MPI_Get_address(location, address); }

int MPI_Errhandler_create(MPI_Handler_function *function, MPI_Errhandler *errhandler)
{
  return MPI_Comm_create_errhandler((MPI_Comm_errhandler_function *)function, errhandler);
}

int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler *errhandler)
{
  return MPI_Comm_get_errhandler(comm, errhandler);
}

int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler)
{
  return MPI_Comm_set_errhandler(comm, errhandler);
}

int MPI_Type_extent(MPI_Datatype type, MPI_Aint *extent)
{
  MPI_Aint lb;
  return MPI_Type_get_extent(type, &lb, extent);
}

int MPI_Type_lb(MPI_Datatype type, MPI_Aint *lb)
{
  MPI_Aint extent;
  return MPI_Type_get_extent(type, lb, &extent);
}

int MPI_Type_ub(MPI_Datatype type, MPI_Aint *ub)
{
  MPI_Aint lb, extent;
  int rc = MPI_Type_get_extent(type, &lb, &extent);
  if (rc == MPI_SUCCESS) *ub = lb + extent;
  return rc;
}

int MPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                      MPI_Datatype oldtype, MPI_Datatype *newtype)
{
  return MPI_Type_create_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype,
                                  newtype);
}

int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                     MPI_Datatype *newtype)
{
  return MPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

int MPI_Type_struct(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                    MPI_Datatype array_of_types[], MPI_Datatype *newtype)
{
  return MPI_Type_create_struct(count, array_of_blocklengths, array_of_displacements,
                                array_of_types, newtype);
}
