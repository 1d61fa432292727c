/* traceview's compiled event scanner: one chunk of a traceEvents array -> columns.
 *
 * Pure C (no Python): the CPython module (module.c) and the fuzz harness
 * (fuzz/fuzz_scan.c) both call it. It takes the items of a JSON array (the text
 * between the brackets) and fills the columns the msgspec path fills
 * (traceview/read/columns.py: chunk_part), or gives up with TV_BAIL as soon as
 * it meets anything outside the grammar it is sure of: then the caller decodes
 * the chunk with msgspec, so a bail never changes a result, only its speed.
 * It never reads outside [p, p + n) and never recurses.
 */
#ifndef TRACEVIEW_SCAN_H
#define TRACEVIEW_SCAN_H

#include <stddef.h>
#include <stdint.h>

enum { TV_OK = 0, TV_BAIL = 1, TV_NOMEM = 2 };

/* the factorized columns, each with its own table of distinct values */
enum {
    T_X_CAT, T_X_NAME, T_X_PID, T_X_TID,
    T_X_INPUT_DIMS, T_X_INPUT_TYPES, T_X_CONCRETE_INPUTS, T_X_CALL_STACK,
    T_F_PH, T_F_CAT, T_F_ID, T_F_PID, T_F_TID,
    T_M_PID, T_M_TID,
    T_PHASE,
    TV_NTABLES
};
#define TV_X_TABLES 8      /* T_X_CAT .. T_X_CALL_STACK: codes per X event */
#define TV_F_TABLES 5      /* T_F_PH .. T_F_TID: codes per flow event */
#define TV_M_TABLES 2      /* T_M_PID, T_M_TID: codes per [memory] event */
#define TV_X_INTS 8        /* correlation, External id, external id, device, stream, bytes,
                              Python id, Python parent id */
#define TV_M_INTS 6        /* Addr, Bytes, Total Allocated, Total Reserved, Device Type, Device Id */
#define TV_MISSING INT64_MIN

enum { TV_KIND_STR = 0, TV_KIND_INT = 1, TV_KIND_RAW = 2 };

typedef struct { int64_t *v; size_t n, cap; } tv_i64;
typedef struct { int32_t *v; size_t n, cap; } tv_i32;
typedef struct { uint8_t *v; size_t n, cap; } tv_u8;

typedef struct {
    uint64_t hash;
    int64_t ival;      /* TV_KIND_INT */
    size_t off, len;   /* TV_KIND_STR (decoded UTF-8) and TV_KIND_RAW (JSON text): bytes in arena */
    uint8_t kind;
} tv_entry;

typedef struct {
    tv_entry *e;       /* distinct values, in order of first appearance */
    size_t n, cap;
    int32_t *slots;    /* open addressing: entry index, -1 empty */
    size_t nslots;
    tv_u8 arena;
    size_t last;       /* 1 + the entry found last (0: none): consecutive events often repeat it */
} tv_table;

typedef struct {
    size_t n_events;
    tv_table tables[TV_NTABLES];
    tv_i64 phase_counts;            /* per entry of tables[T_PHASE] */
    /* X (complete) events */
    tv_i64 x_ts, x_dur;
    tv_i32 x_codes[TV_X_TABLES];
    tv_i64 x_int[TV_X_INTS];        /* n 0 with rows in the mask: every value 0 (push_int) */
    tv_u8 x_mask[TV_X_INTS];        /* 1: no int there (masked) */
    /* flow (s, f, t) events */
    tv_i64 f_ts;
    tv_i32 f_codes[TV_F_TABLES];
    /* [memory] instant events */
    tv_i64 m_ts;
    tv_i32 m_codes[TV_M_TABLES];
    tv_i64 m_int[TV_M_INTS];
    tv_u8 m_mask[TV_M_INTS];
} tv_result;

/* Scan the items of one JSON array: ``p[0:n]`` is the text between its brackets.
 * Returns TV_OK (``out`` filled), TV_BAIL or TV_NOMEM. ``out`` must be freed with
 * tv_result_free whatever the result. */
int tv_scan(const uint8_t *p, size_t n, tv_result *out);
/* tv_scan for a chunk that may hold the end of the array: ``p[0:n]`` starts after the
 * array's '[' or at an item, and runs to the end of the file or to just after an item.
 * On TV_OK, ``*closed_at`` is the offset of the array's ']' (the items before it are
 * scanned, nothing after it is looked at) or TV_NOT_CLOSED when the text ends after an item. */
#define TV_NOT_CLOSED SIZE_MAX
int tv_scan_open(const uint8_t *p, size_t n, tv_result *out, size_t *closed_at);
/* The offset of the '[' that opens the top-level object's traceEvents, or -1 where the
 * text does not start as an object whose members up to traceEvents are plain JSON (no
 * escaped key, nesting at most 64 deep) within ``p[0:n]``: the caller then splits the
 * document with msgspec. */
int64_t tv_find_events(const uint8_t *p, size_t n);
void tv_result_init(tv_result *out);
/* The vectors' memory: a vector's ``v`` of ``cap`` bytes (its capacity) is freed with tv_free,
 * whoever holds it last (the CPython module hands the columns' vectors to Python). */
#ifndef TV_BIG_BYTES  /* the fuzzer builds with a page: its inputs' vectors then take that path too */
#define TV_BIG_BYTES ((size_t)1 << 20)
#endif
void *tv_realloc(void *v, size_t used, size_t old_cap, size_t new_cap);
void tv_free(void *v, size_t cap);
/* One part of a join: ``len`` bytes at ``v``, in a vector of ``cap`` bytes (tv_realloc's).
 * ``own``: the join may take its memory (the caller holds it no longer); it is then freed or
 * moved into the result, and ``v`` set to NULL. */
typedef struct { void *v; size_t len, cap; int own; } tv_part;
/* The parts' bytes one after the other in a new vector of ``*cap`` bytes (free it with
 * tv_free); NULL when out of memory, every part then left as it was. On Linux the pages of the
 * parts it owns are moved into the result (mremap) as they are copied from: the first part's
 * with its bytes where they are, the others' as room for the parts after them, so that the
 * join faults in few fresh pages. */
void *tv_join(tv_part *parts, size_t n, size_t *cap);
/* 1 when the scanner's lookup tables agree with its field names (checked once at load) */
int tv_check_tables(void);
void tv_result_free(tv_result *out);

#endif
