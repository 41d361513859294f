# lib_mpi.sh: what the shell tests of tests/mpi share (sourced, not a test): tests/cli/lib.sh, then
# `mpi N CMD...`, CMD on N processes under mpirun (oversubscribed: CI has 2 cores; as root with the
# two variables OpenMPI asks for). Without MPI in the build the test is skipped (exit 77; CI has
# MPI, and a skip there fails CI).
. "$(dirname "${BASH_SOURCE[0]}")/../cli/lib.sh"
if [ "${TSC_HAVE_MPI:-0}" != 1 ] || ! command -v mpirun >/dev/null; then
  echo "skip: this build has no MPI (install openmpi-bin libopenmpi-dev and rebuild)"; exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# In the sanitized build (make asan sets ASAN_OPTIONS), leaks are not checked in these tests: OpenMPI
# keeps what MPI_Init set up past MPI_Finalize (46 leaks in `mpirun -n 2 tilescope mpi-info` alone),
# and its components are unloaded before the report, so their frames read "<unknown module>" and no
# suppression can name them. Memory errors are still checked; leaks of the same library code are
# checked by the one-process tests.
if [ -n "${ASAN_OPTIONS:-}" ]; then export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"; fi
# one node, no network: the shared-memory and self transports only, quietly
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
mpi() { local n=$1; shift; timeout "${MPI_TIMEOUT:-300}" mpirun --oversubscribe -n "$n" "$@"; }
