#!/bin/sh
# Build a `trec_eval` command-line binary for the benchmarks, without network
# access beyond PyPI.  Installs into the directory of --peer-python's venv
# (default /work/venvs/bench/bin/trec_eval); bench.py finds it there.
#
# Two ways, tried in order:
#
#  1. TREC_EVAL_SRC=/path/to/trec_eval-9.0.8 (an unpacked upstream release,
#     https://github.com/usnistgov/trec_eval): plain `make` there, copy the
#     binary.  Upstream sources are never committed to this repository.
#
#  2. Otherwise: pytrec-eval-terrier's sdist does NOT contain trec_eval's C
#     sources (its setup.py downloads them from GitHub at build time, which
#     fails here), but its wheel's extension module pytrec_eval_ext*.so
#     contains *all* of trec_eval 9.0.8 compiled with -O3 except the
#     command-line main() (trec_eval.c), and exports those symbols
#     (te_trec_measures, te_rel_info_format, te_results_format, ...).
#     So we compile a small driver (below, written for this harness) that
#     re-implements trec_eval.c's main loop -- same file readers, same measure
#     init/calc/acc/avg/print functions, same per-query linear qid search --
#     and link it against that .so (and libpython, which the .so needs to
#     load; no Python code is ever executed).
#     Supported options: -q -c -n -J -l N -M N -N N -m measure[.params];
#     qrels + trec_results formats only.  Output is trec_eval's own.
set -eu
VENV=${VENV:-/work/venvs/bench}
PY=$VENV/bin/python
OUT=$VENV/bin/trec_eval
CC=${CC:-gcc}

if [ -n "${TREC_EVAL_SRC:-}" ]; then
    make -C "$TREC_EVAL_SRC"
    cp "$TREC_EVAL_SRC/trec_eval" "$OUT"
    echo "built $OUT from $TREC_EVAL_SRC"
    exit 0
fi

SO=$("$PY" -c 'import pytrec_eval_ext; print(pytrec_eval_ext.__file__)')
SODIR=$(dirname "$SO")
SONAME=$(basename "$SO")
LIBDIR=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')
PYLIB=$("$PY" -c 'import sysconfig; v=sysconfig.get_config_var("LDVERSION"); print("python"+v)')
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT

cat > "$BUILD/te_driver.c" <<'EOF'
/* Minimal trec_eval main() for the rag_eval benchmarks.  Links against the
   trec_eval 9.0.8 library code compiled into pytrec_eval_ext.so.  The type
   declarations below mirror trec_eval 9.x's public ABI (trec_eval.h,
   trec_format.h) -- field order and types must match exactly. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *measure_name; char *parameters; } MEAS_ARG;
typedef struct {
    long query_flag, summary_flag, debug_level;
    char *debug_query;
    long relation_flag, average_complete_flag, judged_docs_only_flag;
    long num_docs_in_coll, relevance_level, max_num_docs_per_topic;
    char *rel_info_format, *results_format;
    long zscore_flag;
    MEAS_ARG *meas_arg;
} EPI;
typedef struct { char *name; double value; } TREC_EVAL_VALUE;
typedef struct {
    char *qid; long num_queries; TREC_EVAL_VALUE *values;
    long num_values, max_num_values;
} TREC_EVAL;
typedef struct { char *qid, *run_id, *ret_format; void *q_results; } RESULTS;
typedef struct { long num_q_results, max_num_q_results; RESULTS *results; } ALL_RESULTS;
typedef struct { char *qid, *rel_format; void *q_rel_info; } REL_INFO;
typedef struct { long num_q_rels, max_num_q_rels; REL_INFO *rel_info; } ALL_REL_INFO;
typedef struct trec_meas {
    char *name, *explanation;
    int (*init_meas)(EPI *, struct trec_meas *, TREC_EVAL *);
    int (*calc_meas)(const EPI *, const REL_INFO *, const RESULTS *,
                     const struct trec_meas *, TREC_EVAL *);
    int (*acc_meas)(const EPI *, const struct trec_meas *, const TREC_EVAL *, TREC_EVAL *);
    int (*calc_avg_meas)(const EPI *, const struct trec_meas *, const ALL_REL_INFO *, TREC_EVAL *);
    int (*print_single_meas)(const EPI *, const struct trec_meas *, const TREC_EVAL *);
    int (*print_final_and_cleanup_meas)(const EPI *, struct trec_meas *, TREC_EVAL *);
    void *meas_params;
    long eval_index;
} TREC_MEAS;
typedef struct { char *name; char **name_list; } NICKNAME;
typedef struct { char *name, *explanation; int (*get_file)(EPI *, char *, ALL_REL_INFO *); int (*cleanup)(void); } REL_FMT;
typedef struct { char *name, *explanation; int (*get_file)(EPI *, char *, ALL_RESULTS *); int (*cleanup)(void); } RES_FMT;
typedef struct { char *rel_info_format, *results_info_format, *explanation; int (*cleanup)(void); } INTER_PROCS;
typedef struct { char *docno; double sim; } TEXT_RESULTS;
typedef struct { long num_text_results, max_num_text_results; TEXT_RESULTS *text_results; } TEXT_RESULTS_INFO;

extern int te_num_trec_measures;
extern TREC_MEAS *te_trec_measures[];
extern int te_num_trec_measure_nicknames;
extern NICKNAME te_trec_measure_nicknames[];
extern int te_num_rel_info_format;
extern REL_FMT te_rel_info_format[];
extern int te_num_results_format;
extern RES_FMT te_results_format[];
extern int te_num_form_inter_procs;
extern INTER_PROCS te_form_inter_procs[];

#define UNDEF (-1)
#define MARKED(m) (-2 == (m)->eval_index)
#define REQUESTED(m) (0 <= (m)->eval_index)

static int mark_one(const char *name)
{
    for (int i = 0; i < te_num_trec_measures; i++)
        if (0 == strcmp(name, te_trec_measures[i]->name)) {
            te_trec_measures[i]->eval_index = -2;
            return 1;
        }
    return UNDEF;
}

static int mark(EPI *epi, long *nargs, char *arg)
{
    char *dot = strchr(arg, '.');
    if (dot) {
        *dot = '\0';
        if (!dot[1])
            return UNDEF;
        epi->meas_arg[*nargs].measure_name = arg;
        epi->meas_arg[*nargs].parameters = dot + 1;
        (*nargs)++;
        epi->meas_arg[*nargs].measure_name = NULL;
    }
    for (int i = 0; i < te_num_trec_measure_nicknames; i++)
        if (0 == strcmp(arg, te_trec_measure_nicknames[i].name)) {
            for (char **n = te_trec_measure_nicknames[i].name_list; *n; n++)
                if (UNDEF == mark_one(*n))
                    return UNDEF;
            return 1;
        }
    return mark_one(arg);
}

int main(int argc, char **argv)
{
    EPI epi = { 0, 1, 0, NULL, 1, 0, 0, 0, 1, LONG_MAX, "qrels", "trec_results", 0, NULL };
    ALL_REL_INFO rel; ALL_RESULTS res;
    TREC_EVAL accum = { "all", 0, NULL, 0, 0 }, q;
    TEXT_RESULTS bogus_r = { "ceci_nest_pas_un_docno", 1.0 };
    TEXT_RESULTS_INFO bogus_i = { 1, 1, &bogus_r };
    RESULTS bogus = { NULL, NULL, "trec_results", &bogus_i };
    long nargs = 0, marked = 0, i, j, m;
    int c;

    epi.meas_arg = calloc(argc + 1, sizeof(MEAS_ARG));
    while (-1 != (c = getopt(argc, argv, "qm:cl:nJN:M:"))) {
        switch (c) {
        case 'q': epi.query_flag++; break;
        case 'c': epi.average_complete_flag++; break;
        case 'n': epi.summary_flag = 0; break;
        case 'J': epi.judged_docs_only_flag++; break;
        case 'l': epi.relevance_level = atol(optarg); break;
        case 'N': epi.num_docs_in_coll = atol(optarg); break;
        case 'M': epi.max_num_docs_per_topic = atol(optarg); break;
        case 'm':
            if (UNDEF == mark(&epi, &nargs, optarg)) {
                fprintf(stderr, "trec_eval: illegal measure '%s'\n", optarg);
                return 1;
            }
            marked++;
            break;
        default:
            fputs("usage: trec_eval [-q] [-c] [-n] [-J] [-l N] [-M N] [-N N] {-m measure}* qrels results\n", stderr);
            return 1;
        }
    }
    if (optind + 2 != argc) {
        fputs("usage: trec_eval [-q] [-c] {-m measure}* qrels results\n", stderr);
        return 1;
    }
    for (i = 0; i < te_num_rel_info_format; i++)
        if (0 == strcmp(epi.rel_info_format, te_rel_info_format[i].name))
            break;
    if (i >= te_num_rel_info_format || UNDEF == te_rel_info_format[i].get_file(&epi, argv[optind], &rel)) {
        fprintf(stderr, "trec_eval: Quit in file '%s'\n", argv[optind]);
        return 2;
    }
    for (i = 0; i < te_num_results_format; i++)
        if (0 == strcmp(epi.results_format, te_results_format[i].name))
            break;
    if (i >= te_num_results_format || UNDEF == te_results_format[i].get_file(&epi, argv[optind + 1], &res)) {
        fprintf(stderr, "trec_eval: Quit in file '%s'\n", argv[optind + 1]);
        return 2;
    }
    if (!marked && UNDEF == mark(&epi, &nargs, strdup("official")))
        return 1;
    for (m = 0; m < te_num_trec_measures; m++)
        if (MARKED(te_trec_measures[m]) &&
            UNDEF == te_trec_measures[m]->init_meas(&epi, te_trec_measures[m], &accum)) {
            fprintf(stderr, "trec_eval: Cannot initialize measure '%s'\n", te_trec_measures[m]->name);
            return 2;
        }
    q.values = malloc(accum.num_values * sizeof(TREC_EVAL_VALUE));
    memcpy(q.values, accum.values, accum.num_values * sizeof(TREC_EVAL_VALUE));
    q.num_values = accum.num_values;
    q.num_queries = 0;

    for (i = 0; i < rel.num_q_rels; i++) {
        RESULTS *this_result = NULL;
        for (j = 0; j < res.num_q_results; j++)     /* linear, as trec_eval.c */
            if (0 == strcmp(res.results[j].qid, rel.rel_info[i].qid)) {
                this_result = &res.results[j];
                break;
            }
        if (!this_result) {
            if (!epi.average_complete_flag)
                continue;
            bogus.qid = rel.rel_info[i].qid;
            bogus.run_id = res.results[0].run_id;
            this_result = &bogus;
        }
        for (m = 0; m < q.num_values; m++)
            q.values[m].value = 0;
        q.qid = this_result->qid;
        for (m = 0; m < te_num_trec_measures; m++)
            if (REQUESTED(te_trec_measures[m]) &&
                UNDEF == te_trec_measures[m]->calc_meas(&epi, &rel.rel_info[i], this_result,
                                                        te_trec_measures[m], &q)) {
                fprintf(stderr, "trec_eval: Can't calculate measure '%s'\n", te_trec_measures[m]->name);
                return 4;
            }
        if (this_result == &bogus)
            for (m = 0; m < q.num_values; m++)
                if (0 == strcmp(q.values[m].name, "num_ret") ||
                    0 == strcmp(q.values[m].name, "utility") ||
                    0 == strncmp(q.values[m].name, "unj", 3) ||
                    0 == strcmp(q.values[m].name, "rbp_resid"))
                    q.values[m].value = 0;
        for (m = 0; m < te_num_trec_measures; m++)
            if (REQUESTED(te_trec_measures[m])) {
                te_trec_measures[m]->acc_meas(&epi, te_trec_measures[m], &q, &accum);
                if (epi.query_flag)
                    te_trec_measures[m]->print_single_meas(&epi, te_trec_measures[m], &q);
            }
        accum.num_queries++;
    }
    if (accum.num_queries == 0) {
        fprintf(stderr, "trec_eval: No queries with both results and relevance info\n");
        return 7;
    }
    for (m = 0; m < te_num_trec_measures; m++)
        if (REQUESTED(te_trec_measures[m]) &&
            (UNDEF == te_trec_measures[m]->calc_avg_meas(&epi, te_trec_measures[m], &rel, &accum) ||
             UNDEF == te_trec_measures[m]->print_final_and_cleanup_meas(&epi, te_trec_measures[m], &accum))) {
            fprintf(stderr, "trec_eval: Can't print measure '%s'\n", te_trec_measures[m]->name);
            return 8;
        }
    return 0;
}
EOF

"$CC" -O2 -o "$OUT" "$BUILD/te_driver.c" \
    -L"$SODIR" -l:"$SONAME" -Wl,-rpath,"$SODIR" \
    -L"$LIBDIR" -l"$PYLIB" -Wl,-rpath,"$LIBDIR" -lm
echo "built $OUT (driver linked against $SO)"
