/* mpi.c: the job's processes for the commands that run on several (docs/DISTRIBUTED.md).
 *
 * Built with MPI when CMake finds it (TSC_HAVE_MPI): MPI is initialised only when the program was
 * started by a launcher (mpirun, srun, a PMI or PMIx environment), so a plain `tilescope` run
 * never touches MPI. Without MPI in the build, a start by a launcher of more than one process is
 * refused: N copies of one job writing one folder would each do all the work and race. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_comm.h"

#ifdef TSC_HAVE_MPI
#include <mpi.h>
#endif

/* The world size a launcher announced in the environment, or 0 when none did. */
static int launcher_size(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v) > 0 ? atoi(v) : 1;
    }
    return 0;
}

#ifdef TSC_HAVE_MPI
static tsc_status_t mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return tsc_error_set(TSC_ERR_EXTERNAL, "MPI %s failed: %s", what, msg);
}
/* Messages above INT_MAX bytes go in pieces of 1 GiB. */
#define PIECE ((size_t)1 << 30)
static tsc_status_t mpi_send(void *ctx, int dst, const void *buf, size_t n) {
    (void)ctx;
    for (size_t at = 0; at < n || (n == 0 && at == 0); at += PIECE) {
        size_t k = n - at < PIECE ? n - at : PIECE;
        int rc = MPI_Send((const char *)buf + at, (int)k, MPI_BYTE, dst, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "send");
        if (n == 0) break;
    }
    return TSC_OK;
}
static tsc_status_t mpi_recv(void *ctx, int src, void *buf, size_t n) {
    (void)ctx;
    for (size_t at = 0; at < n || (n == 0 && at == 0); at += PIECE) {
        size_t k = n - at < PIECE ? n - at : PIECE;
        int rc = MPI_Recv((char *)buf + at, (int)k, MPI_BYTE, src, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "receive");
        if (n == 0) break;
    }
    return TSC_OK;
}
static tsc_status_t mpi_bcast(void *ctx, int root, void *buf, size_t n) {
    (void)ctx;
    for (size_t at = 0; at < n; at += PIECE) {
        size_t k = n - at < PIECE ? n - at : PIECE;
        int rc = MPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcast");
    }
    return TSC_OK;
}
static tsc_status_t mpi_max(void *ctx, int64_t *v, int n) {
    (void)ctx;
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? TSC_OK : mpi_fail(rc, "all-reduce");
}
static tsc_status_t mpi_barrier(void *ctx) {
    (void)ctx;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? TSC_OK : mpi_fail(rc, "barrier");
}
static tsc_comm_t world = {0, 1, "mpi", NULL, mpi_send, mpi_recv, mpi_bcast, mpi_max, mpi_barrier};
static void finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}
#endif

static int started, ready;

int tsc_cli_comm_start(const char *cmd) {
    int n = launcher_size();
    if (!n || started) return 0;
    started = 1;
#ifdef TSC_HAVE_MPI
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return tsc_cli_fail(cmd, "started by an MPI launcher, but MPI_Init failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world.size);
    atexit(finalize);
    ready = 1;
    return 0;
#else
    if (n > 1)
        return tsc_cli_fail(cmd, "started by an MPI launcher as one of %d processes, but this tilescope was built "
                            "without MPI (install libopenmpi-dev and rebuild; docs/DISTRIBUTED.md)", n);
    return 0;
#endif
}

const tsc_comm_t *tsc_cli_comm(void) {
#ifdef TSC_HAVE_MPI
    if (ready) return &world;
#endif
    return tsc_comm_serial();
}

int tsc_cli_comm_built(void) {
#ifdef TSC_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

const char tsc_usage_mpi_info[] =
    "usage: tilescope mpi-info\n"
    "\n"
    "Prints this process's rank and the job's size as the multi-process commands (train, diagnose)\n"
    "see them: `mpirun -n 4 tilescope mpi-info` prints one line per process, \"rank R of 4 (mpi)\"; a run\n"
    "without a launcher prints \"rank 0 of 1 (serial)\". Checks a launcher set-up before a long job\n"
    "(docs/DISTRIBUTED.md). Built with MPI: " 
#ifdef TSC_HAVE_MPI
    "yes.\n";
#else
    "no (install libopenmpi-dev and rebuild).\n";
#endif

int tsc_cmd_mpi_info(int argc, char **argv) {
    int rc = tsc_cli_args("mpi-info", argc, argv, NULL, 0, NULL, NULL, 0, NULL);
    if (rc) return rc;
    rc = tsc_cli_comm_start("mpi-info");
    if (rc) return rc;
    const tsc_comm_t *c = tsc_cli_comm();
    printf("rank %d of %d (%s)\n", c->rank, c->size, c->name);
    fflush(stdout);
    return 0;
}
