/* gyre_mpi_bench: OpenMPI's own collectives, the baseline of `gyre bench collectives --baseline
   mpi`. Times exactly as anchors/mpi_allreduce_bw.c and gyre's benchmark do: warm-up calls, a
   barrier, `iters` back-to-back calls, the mean per call on each rank, the maximum over ranks.
   Sizes, element counts, iterations and buffer placement follow the same rules as gyre's
   (bench/cli/bench_options.cc). Rank 0 prints one JSON object per size:
     {"bytes":B,"count":C,"time_us":T,"op":"allreduce","np":N,"iters":I}
   Usage: mpirun -np N gyre_mpi_bench [--op OP] [--dtype T] [--redop R] [--min-bytes B]
          [--max-bytes B] [--step-factor F] [--iters N] [--warmup N] [--inplace|--no-inplace] */
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, BARRIER } Op;

typedef struct {
  Op op;
  const char* opName;
  MPI_Datatype dtype;
  int elemSize;
  int isFloat;
  MPI_Op redop;
  int average;
  unsigned long long minBytes, maxBytes;
  int stepFactor, iters, warmup, inplace;
} Options;

static int isRankZero(void) {
  const char* r = getenv("OMPI_COMM_WORLD_RANK");
  return r == NULL || strcmp(r, "0") == 0;
}

static void usageError(const char* what, const char* value) {
  if (isRankZero()) fprintf(stderr, "gyre_mpi_bench: invalid %s '%s'\n", what, value);
  exit(2);
}

static void parseOp(Options* o, const char* s) {
  static const char* names[] = {"allreduce",     "broadcast", "reduce", "allgather",
                                "reducescatter", "alltoall",  "barrier"};
  for (int i = 0; i < 7; ++i) {
    if (strcmp(s, names[i]) == 0) {
      o->op = (Op)i;
      o->opName = names[i];
      return;
    }
  }
  usageError("--op", s);
}

static void parseDtype(Options* o, const char* s) {
  if (!strcmp(s, "float32") || !strcmp(s, "float") || !strcmp(s, "f32")) {
    o->dtype = MPI_FLOAT, o->elemSize = 4, o->isFloat = 1;
  } else if (!strcmp(s, "float64") || !strcmp(s, "double") || !strcmp(s, "f64")) {
    o->dtype = MPI_DOUBLE, o->elemSize = 8, o->isFloat = 1;
  } else if (!strcmp(s, "int8")) {
    o->dtype = MPI_INT8_T, o->elemSize = 1, o->isFloat = 0;
  } else if (!strcmp(s, "uint8")) {
    o->dtype = MPI_UINT8_T, o->elemSize = 1, o->isFloat = 0;
  } else if (!strcmp(s, "int16")) {
    o->dtype = MPI_INT16_T, o->elemSize = 2, o->isFloat = 0;
  } else if (!strcmp(s, "int32")) {
    o->dtype = MPI_INT32_T, o->elemSize = 4, o->isFloat = 0;
  } else if (!strcmp(s, "int64")) {
    o->dtype = MPI_INT64_T, o->elemSize = 8, o->isFloat = 0;
  } else {
    usageError("--dtype (MPI has float32, float64, int8, uint8, int16, int32, int64)", s);
  }
}

static void parseRedop(Options* o, const char* s) {
  o->average = 0;
  if (!strcmp(s, "sum"))
    o->redop = MPI_SUM;
  else if (!strcmp(s, "average") || !strcmp(s, "avg"))
    o->redop = MPI_SUM, o->average = 1;
  else if (!strcmp(s, "product") || !strcmp(s, "prod"))
    o->redop = MPI_PROD;
  else if (!strcmp(s, "min"))
    o->redop = MPI_MIN;
  else if (!strcmp(s, "max"))
    o->redop = MPI_MAX;
  else
    usageError("--redop", s);
}

static unsigned long long parseCount(const char* what, const char* s) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || *end != '\0') usageError(what, s);
  return v;
}

static void parseArgs(Options* o, int argc, char** argv) {
  static struct option longOptions[] = {{"op", required_argument, 0, 'o'},
                                        {"dtype", required_argument, 0, 'd'},
                                        {"redop", required_argument, 0, 'r'},
                                        {"min-bytes", required_argument, 0, 'b'},
                                        {"max-bytes", required_argument, 0, 'e'},
                                        {"step-factor", required_argument, 0, 'f'},
                                        {"iters", required_argument, 0, 'n'},
                                        {"warmup", required_argument, 0, 'w'},
                                        {"inplace", no_argument, 0, 'i'},
                                        {"no-inplace", no_argument, 0, 'I'},
                                        {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", longOptions, NULL)) != -1) {
    switch (c) {
      case 'o':
        parseOp(o, optarg);
        break;
      case 'd':
        parseDtype(o, optarg);
        break;
      case 'r':
        parseRedop(o, optarg);
        break;
      case 'b':
        o->minBytes = parseCount("--min-bytes", optarg);
        break;
      case 'e':
        o->maxBytes = parseCount("--max-bytes", optarg);
        break;
      case 'f':
        o->stepFactor = (int)parseCount("--step-factor", optarg);
        break;
      case 'n':
        o->iters = (int)parseCount("--iters", optarg);
        break;
      case 'w':
        o->warmup = (int)parseCount("--warmup", optarg);
        break;
      case 'i':
        o->inplace = 1;
        break;
      case 'I':
        o->inplace = 0;
        break;
      default:
        usageError("option", argv[optind - 1]);
    }
  }
  if (o->stepFactor < 2) usageError("--step-factor", "< 2");
  if (o->minBytes == 0 && o->op != BARRIER) usageError("--min-bytes", "0");
}

/* The same rules as gyre's bench_options.cc. */
static int itersFor(const Options* o, unsigned long long bytes) {
  if (o->iters > 0) return o->iters;
  return bytes <= (1u << 20) ? 50 : (bytes <= (16u << 20) ? 10 : 4);
}

static size_t elementsFor(const Options* o, unsigned long long bytes, int np) {
  size_t count = bytes / (size_t)o->elemSize;
  if (o->op == ALLGATHER || o->op == REDUCESCATTER || o->op == ALLTOALL) {
    size_t per = count / (size_t)np;
    count = (per < 1 ? 1 : per) * (size_t)np;
  }
  return o->op == BARRIER ? 0 : count;
}

static void divideBy(const Options* o, char* buf, size_t count, int np) {
  if (o->dtype == MPI_FLOAT)
    for (size_t i = 0; i < count; ++i) ((float*)buf)[i] /= (float)np;
  else if (o->dtype == MPI_DOUBLE)
    for (size_t i = 0; i < count; ++i) ((double*)buf)[i] /= np;
  else if (o->dtype == MPI_INT32_T)
    for (size_t i = 0; i < count; ++i) ((int32_t*)buf)[i] /= np;
  else if (o->dtype == MPI_INT64_T)
    for (size_t i = 0; i < count; ++i) ((int64_t*)buf)[i] /= np;
  else if (o->dtype == MPI_INT16_T)
    for (size_t i = 0; i < count; ++i) ((int16_t*)buf)[i] /= np;
  else if (o->dtype == MPI_INT8_T)
    for (size_t i = 0; i < count; ++i) ((int8_t*)buf)[i] /= np;
  else
    for (size_t i = 0; i < count; ++i) ((uint8_t*)buf)[i] /= np;
}

/* One call; in place only where gyre's API defines it (allreduce, allgather, reduce-scatter). */
static void runOnce(const Options* o, char* a, char* b, size_t count, int rank, int np) {
  const int per = (int)(count / (size_t)np);
  switch (o->op) {
    case ALLREDUCE:
      if (o->inplace)
        MPI_Allreduce(MPI_IN_PLACE, a, (int)count, o->dtype, o->redop, MPI_COMM_WORLD);
      else
        MPI_Allreduce(a, b, (int)count, o->dtype, o->redop, MPI_COMM_WORLD);
      if (o->average) divideBy(o, o->inplace ? a : b, count, np);
      break;
    case BROADCAST:
      MPI_Bcast(a, (int)count, o->dtype, 0, MPI_COMM_WORLD);
      break;
    case REDUCE:
      MPI_Reduce(a, b, (int)count, o->dtype, o->redop, 0, MPI_COMM_WORLD);
      if (o->average && rank == 0) divideBy(o, b, count, np);
      break;
    case ALLGATHER:
      if (o->inplace)
        MPI_Allgather(MPI_IN_PLACE, per, o->dtype, b, per, o->dtype, MPI_COMM_WORLD);
      else
        MPI_Allgather(a, per, o->dtype, b, per, o->dtype, MPI_COMM_WORLD);
      break;
    case REDUCESCATTER:
      /* MPI's in-place result lands at the start of the buffer (gyre's at block `rank`). */
      if (o->inplace)
        MPI_Reduce_scatter_block(MPI_IN_PLACE, a, per, o->dtype, o->redop, MPI_COMM_WORLD);
      else
        MPI_Reduce_scatter_block(a, b, per, o->dtype, o->redop, MPI_COMM_WORLD);
      if (o->average) divideBy(o, o->inplace ? a : b, (size_t)per, np);
      break;
    case ALLTOALL:
      MPI_Alltoall(a, per, o->dtype, b, per, o->dtype, MPI_COMM_WORLD);
      break;
    case BARRIER:
      MPI_Barrier(MPI_COMM_WORLD);
      break;
  }
}

int main(int argc, char** argv) {
  Options o = {ALLREDUCE, "allreduce", MPI_FLOAT, 4, 1, MPI_SUM, 0, 4096, 64ull << 20, 4, 0, 2, 1};
  parseArgs(&o, argc, argv);
  MPI_Init(&argc, &argv);
  int rank, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);

  const size_t capacity =
      (o.maxBytes / (size_t)o.elemSize > (size_t)np ? o.maxBytes / (size_t)o.elemSize : (size_t)np) +
      (size_t)np;
  char* a = malloc(capacity * (size_t)o.elemSize);
  char* b = malloc(capacity * (size_t)o.elemSize);
  if (!a || !b) {
    fprintf(stderr, "gyre_mpi_bench: rank %d cannot allocate %zu bytes\n", rank, capacity * o.elemSize);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* Inputs are 1, as in the anchor. */
  for (size_t i = 0; i < capacity; ++i) {
    char* pa = a + i * (size_t)o.elemSize;
    char* pb = b + i * (size_t)o.elemSize;
    if (o.dtype == MPI_FLOAT)
      *(float*)pa = 1.0f, *(float*)pb = 1.0f;
    else if (o.dtype == MPI_DOUBLE)
      *(double*)pa = 1.0, *(double*)pb = 1.0;
    else
      memset(pa, 0, (size_t)o.elemSize), pa[0] = 1, memset(pb, 0, (size_t)o.elemSize), pb[0] = 1;
  }

  const unsigned long long first = o.op == BARRIER ? 0 : o.minBytes;
  const unsigned long long last = o.op == BARRIER ? 0 : o.maxBytes;
  for (unsigned long long bytes = first; bytes <= last; bytes *= (unsigned long long)o.stepFactor) {
    const size_t count = elementsFor(&o, bytes, np);
    const int iters = itersFor(&o, bytes);
    for (int i = 0; i < o.warmup; ++i) runOnce(&o, a, b, count, rank, np);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) runOnce(&o, a, b, count, rank, np);
    double t = (MPI_Wtime() - t0) / iters, mx = 0;
    MPI_Allreduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("{\"bytes\":%zu,\"count\":%zu,\"time_us\":%.3f,\"op\":\"%s\",\"np\":%d,\"iters\":%d}\n",
             count * (size_t)o.elemSize, count, mx * 1e6, o.opName, np, iters);
      fflush(stdout);
    }
    if (bytes == 0) break;
  }
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
