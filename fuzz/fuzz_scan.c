/* libFuzzer harness for the compiled event scanner (src/cscan/scan.c), built with
 * AddressSanitizer and UndefinedBehaviorSanitizer by fuzz/run.sh.
 *
 * The input is the text between a chunk's brackets, as the reader hands it over; the same
 * bytes also go to the direct path's open scan and to its search for traceEvents. Besides
 * memory safety it checks what the Python side relies on: every column of one kind has
 * one row per event of that kind, codes index their table, and the phase counts add up
 * to the events. A violation aborts, and libFuzzer keeps the input as a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"

#define CHECK(cond) \
    do {            \
        if (!(cond)) abort(); \
    } while (0)

static void check_codes(const tv_i32 *codes, size_t rows, const tv_table *t) {
    CHECK(codes->n == rows);
    for (size_t i = 0; i < rows; i++) CHECK(codes->v[i] >= -1 && codes->v[i] < (int32_t)t->n);
}

static void check_result(const tv_result *r) {
    int64_t total = 0;
    for (size_t k = 0; k < r->phase_counts.n; k++) total += r->phase_counts.v[k];
    CHECK(r->phase_counts.n == r->tables[T_PHASE].n && (size_t)total == r->n_events);
    size_t nx = r->x_ts.n, nf = r->f_ts.n, nm = r->m_ts.n;
    CHECK(r->x_dur.n == nx && nx + nf + nm <= r->n_events);
    for (int k = 0; k < TV_X_TABLES; k++) check_codes(&r->x_codes[k], nx, &r->tables[T_X_CAT + k]);
    for (int k = 0; k < TV_F_TABLES; k++) check_codes(&r->f_codes[k], nf, &r->tables[T_F_PH + k]);
    for (int k = 0; k < TV_M_TABLES; k++) check_codes(&r->m_codes[k], nm, &r->tables[T_M_PID + k]);
    /* an int column's values are all stored, or none (every one 0) */
    for (int k = 0; k < TV_X_INTS; k++) CHECK((r->x_int[k].n == nx || !r->x_int[k].n) && r->x_mask[k].n == nx);
    for (int k = 0; k < TV_M_INTS; k++) CHECK((r->m_int[k].n == nm || !r->m_int[k].n) && r->m_mask[k].n == nm);
    for (int k = 0; k < TV_X_INTS; k++)
        for (size_t i = 0; i < r->x_int[k].n; i++) CHECK(!r->x_mask[k].v[i] || r->x_int[k].v[i] == 0);
    for (int k = 0; k < TV_NTABLES; k++) {
        const tv_table *t = &r->tables[k];
        for (size_t i = 0; i < t->n; i++)
            CHECK(t->e[i].kind == TV_KIND_INT || t->e[i].off + t->e[i].len <= t->arena.n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    CHECK(tv_check_tables());
    /* a copy of exactly `size` bytes, so that ASan catches any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    tv_result r;
    tv_result_init(&r);
    int rc = tv_scan(buf, size, &r);
    CHECK(rc == TV_OK || rc == TV_BAIL || rc == TV_NOMEM);
    if (rc == TV_OK) check_result(&r);
    tv_result_free(&r);
    /* the direct path's open scan: a closing ']' lies inside the text, and where the text
     * holds none the open scan agrees with the closed one */
    size_t closed_at = 0;
    int rc_open = tv_scan_open(buf, size, &r, &closed_at);
    CHECK(rc_open == TV_OK || rc_open == TV_BAIL || rc_open == TV_NOMEM);
    if (rc_open == TV_OK) {
        check_result(&r);
        CHECK(closed_at == TV_NOT_CLOSED || (closed_at < size && buf[closed_at] == ']'));
        if (closed_at == TV_NOT_CLOSED && rc != TV_NOMEM) CHECK(rc == TV_OK);
    }
    tv_result_free(&r);
    int64_t at = tv_find_events(buf, size);
    CHECK(at == -1 || (at >= 0 && (size_t)at < size && buf[at] == '['));
    free(buf);
    return 0;
}
