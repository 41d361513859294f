# lib_mpi.sh: what the shell tests of tests/mpi share (sourced, not a test): tests/cli/lib.sh, then
# `mpi N CMD...`, CMD on N processes under mpirun (oversubscribed: CI has 2 cores; as root with the
# two variables OpenMPI asks for). Without MPI in the build the test is skipped (exit 77; CI has
# MPI, and a skip there fails CI).
. "$(dirname "${BASH_SOURCE[0]}")/../cli/lib.sh"
if [ "${TSC_HAVE_MPI:-0}" != 1 ] || ! command -v mpirun >/dev/null; then
  echo "skip: this build has no MPI (install openmpi-bin libopenmpi-dev and rebuild)"; exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one node, no network: the shared-memory and self transports only, quietly
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
mpi() { local n=$1; shift; timeout "${MPI_TIMEOUT:-300}" mpirun --oversubscribe -n "$n" "$@"; }
