// The baseline: the same prepared point select and single-row update as main.swift, through
// libpq directly (text parameters, text results, values copied out as the wrapper does).
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, double *lat, int n, double total_us) {
    qsort(lat, n, sizeof(double), cmp);
    printf("%-28s %9.0f ops/s  p50 %7.1f us  p99 %7.1f us\n", name, n / (total_us / 1e6), lat[n / 2],
           lat[(int)(n * 0.99)]);
}

static PGresult *must(PGconn *conn, PGresult *res) {
    ExecStatusType s = PQresultStatus(res);
    if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
        fprintf(stderr, "error: %s", PQerrorMessage(conn));
        exit(1);
    }
    return res;
}

int main(int argc, char **argv) {
    const char *conninfo = argv[1];
    int selects = atoi(argv[2]), updates = atoi(argv[3]);
    PGconn *conn = PQconnectdb(conninfo);
    if (PQstatus(conn) != CONNECTION_OK) { fprintf(stderr, "%s", PQerrorMessage(conn)); PQfinish(conn); return 1; }
    PQclear(must(conn, PQprepare(conn, "select_profile",
        "SELECT id, username, display_name, version FROM bench_profiles WHERE id = $1", 0, NULL)));
    PQclear(must(conn, PQprepare(conn, "update_profile",
        "UPDATE bench_profiles SET display_name = $2, version = version + 1 WHERE id = $1", 0, NULL)));
    double *lat = malloc(sizeof(double) * (selects > updates ? selects : updates));
    char id[32], name[64];
    long checksum = 0;

    for (int phase = 0; phase < 2; phase++) {  // phase 0 warms up
        int n = phase ? selects : selects / 10;
        double start = now_us();
        for (int i = 0; i < n; i++) {
            double t = now_us();
            snprintf(id, sizeof id, "%d", 1 + i % 1000);
            const char *params[1] = {id};
            PGresult *res = must(conn, PQexecPrepared(conn, "select_profile", 1, params, NULL, NULL, 0));
            for (int c = 0; c < PQnfields(res); c++) {  // copy out, as the wrapper does
                char *copy = strdup(PQgetvalue(res, 0, c));
                checksum += copy[0];
                free(copy);
            }
            checksum += strtol(PQgetvalue(res, 0, 0), NULL, 10);
            PQclear(res);
            lat[i] = now_us() - t;
        }
        if (phase) report("C    select (prepared)", lat, n, now_us() - start);
    }
    for (int phase = 0; phase < 2; phase++) {
        int n = phase ? updates : updates / 10;
        double start = now_us();
        for (int i = 0; i < n; i++) {
            double t = now_us();
            snprintf(id, sizeof id, "%d", 1 + i % 1000);
            snprintf(name, sizeof name, "Name %d", i);
            const char *params[2] = {id, name};
            PGresult *res = must(conn, PQexecPrepared(conn, "update_profile", 2, params, NULL, NULL, 0));
            checksum += strtol(PQcmdTuples(res), NULL, 10);
            PQclear(res);
            lat[i] = now_us() - t;
        }
        if (phase) report("C    update (1 row)", lat, n, now_us() - start);
    }
    fprintf(stderr, "checksum %ld\n", checksum);
    free(lat);
    PQfinish(conn);
    return 0;
}
