/* traceview's compiled event scanner: see scan.h.
 *
 * The grammar it accepts is strict JSON (RFC 8259) with strict UTF-8, and within it
 * only what the msgspec path (traceview/read/events.py: Event, Args) decodes to the
 * same values. Anything else -- a field of the wrong type, a duplicate or escaped
 * key, a number it cannot convert exactly, invalid UTF-8, nesting past MAX_DEPTH --
 * is a bail (TV_BAIL): the chunk then goes to msgspec, which keeps every rule of
 * what is dropped and what is an error. Being stricter than msgspec costs speed
 * only; being looser would change a result, so every rule here errs strict.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE  /* mremap */
#endif
#include "scan.h"

#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* the few small functions every value goes through, inlined into their callers: their calls'
 * saving and restoring of registers cost ~25% of the scan (callgrind, 10 MB of a real trace) */
#if defined(__GNUC__) || defined(__clang__)
#define INLINE inline __attribute__((always_inline))
#else
#define INLINE inline
#endif

#define MAX_DEPTH 64          /* nesting a skipped value may have (real events: 4-5) */
#define MAX_ANY_NUMBER 300    /* longest number kept for an Any field (msgspec: out of range) */
#define MAX_INT_DIGITS 18     /* ints with more digits bail: they may not fit int64 */
#define MAX_TIME_DIGITS 16    /* ts/dur integer digits (epoch microseconds have 16) */
/* |us| below this: ns below 2**62 - 904, where times_ns's int path (MISSING from
 * 2**62 // 1000 us) and its text path (MISSING from 2**62 ns) agree */
#define TIME_LIMIT_US 4611686018427387LL

enum { V_ABSENT = 0, V_NULL, V_STR, V_INT, V_BOOL, V_OTHER };

typedef struct {
    uint8_t kind;
    uint8_t in_scratch;   /* V_STR: decoded into the scratch buffer (it had escapes) */
    int64_t i;            /* V_INT: the int, or for ts/dur the nanoseconds */
    const uint8_t *sp;    /* V_STR not in scratch, and raw values: the text */
    size_t soff, sn;      /* V_STR in scratch: offset; V_STR and raw: length */
} val;

typedef struct {
    const uint8_t *p, *end;
    tv_u8 scratch;        /* strings with escapes, decoded: reset per event */
    int err;              /* TV_BAIL or TV_NOMEM once something failed */
} cur;

/* ---- growable vectors ------------------------------------------------- */

/* A vector of TV_BIG_BYTES or more lives in its own mapping on Linux, grown by mremap: no
 * copy, and no page touched but those written. With realloc a vector grown by doubling was
 * copied at each step into fresh pages wherever malloc's heap served it (its mmap threshold
 * rises to the largest block freed), faulting in about twice the columns' size. Freed, a
 * mapping goes back to the system at once: the chunks' columns do not stay in the process
 * while they are joined. Elsewhere: realloc and free. */
void *tv_realloc(void *v, size_t used, size_t old_cap, size_t new_cap) {
#ifdef __linux__
    if (new_cap >= TV_BIG_BYTES) {
        void *nv;
        if (old_cap >= TV_BIG_BYTES) {
            nv = mremap(v, old_cap, new_cap, MREMAP_MAYMOVE);
            return nv == MAP_FAILED ? NULL : nv;
        }
        nv = mmap(NULL, new_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (nv == MAP_FAILED) return NULL;
        if (used) memcpy(nv, v, used);
        free(v);
        return nv;
    }
#else
    (void)old_cap;
#endif
    (void)used;
    return realloc(v, new_cap);
}

void tv_free(void *v, size_t cap) {
#ifdef __linux__
    if (cap >= TV_BIG_BYTES) {
        munmap(v, cap);
        return;
    }
#else
    (void)cap;
#endif
    free(v);
}

#ifdef __linux__
static size_t page_up(size_t n, size_t page) {
    return (n + page - 1) / page * page;
}

/* Move ``size`` bytes of pages from ``from`` to ``to`` (1), or leave them (0). mremap with
 * MREMAP_FIXED unmaps the target first and may still fail (ENOMEM): the target is then mapped
 * afresh, so that the copy that follows in its place finds memory there (it held no bytes
 * written: nothing is moved over them). Where even that fails, no memory is left to go on. */
static int move_pages(void *from, size_t size, char *to) {
    if (mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, to) != MAP_FAILED)
        return 1;
    if (mmap(to, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        abort();
    return 0;
}

/* ``d[0:cap]``, a fresh mapping, filled with the parts (see scan.h). ``room``: mappings of
 * parts already copied, whose pages (written once, so present) are moved in after what is
 * filled, where the next parts' bytes go; a fresh page of ``d`` is faulted in only where
 * none is left. Nothing is ever moved over bytes written. */
static void join_mapped(tv_part *parts, size_t n, char *d, size_t cap, tv_part **room) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), off = 0, mapped = 0, nroom = 0;
    for (size_t i = 0; i < n; i++) {
        tv_part *q = &parts[i];
        int movable = q->own && q->v && q->cap >= TV_BIG_BYTES && q->cap % page == 0;
        if (i == 0 && movable && q->cap <= cap && move_pages(q->v, q->cap, d)) {
            off = q->len, mapped = q->cap, q->v = NULL;  /* its bytes are where they belong */
            continue;
        }
        size_t need = page_up(off + q->len, page);
        while (mapped < need && nroom) {
            tv_part *r = room[--nroom];  /* only its written pages: the rest hold none */
            size_t size = page_up(r->len, page) < cap - mapped ? page_up(r->len, page) : cap - mapped;
            if (size < r->cap) munmap((char *)r->v + size, r->cap - size);
            if (!size)  /* nothing written: all of it went above */
                ;
            else if (move_pages(r->v, size, d + mapped))
                mapped += size;
            else
                munmap(r->v, size);
            r->v = NULL;
        }
        if (q->len) memcpy(d + off, q->v, q->len);
        off += q->len;
        if (mapped < page_up(off, page)) mapped = page_up(off, page);
        if (movable) {
            room[nroom++] = q;
        } else if (q->own) {
            tv_free(q->v, q->cap);
            q->v = NULL;
        }
    }
    while (nroom) {
        tv_part *r = room[--nroom];
        munmap(r->v, r->cap);
        r->v = NULL;
    }
}
#endif

void *tv_join(tv_part *parts, size_t n, size_t *cap) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += parts[i].len;
    *cap = total ? total : 1;
#ifdef __linux__
    if (*cap >= TV_BIG_BYTES) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        *cap = page_up(*cap, page);
        tv_part **room = malloc((n ? n : 1) * sizeof *room);
        if (!room) return NULL;
        char *d = mmap(NULL, *cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (d == MAP_FAILED) {
            free(room);
            return NULL;
        }
        join_mapped(parts, n, d, *cap, room);
        free(room);
        return d;
    }
#endif
    char *d = tv_realloc(NULL, 0, 0, *cap);
    if (!d) return NULL;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].len) memcpy(d + off, parts[i].v, parts[i].len);
        off += parts[i].len;
        if (parts[i].own) {
            tv_free(parts[i].v, parts[i].cap);
            parts[i].v = NULL;
        }
    }
    return d;
}

/* room for ``need`` elements of ``elt`` bytes in *v (``used`` of them held), by doubling */
static int grow(void **v, size_t *cap, size_t used, size_t need, size_t elt) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > (SIZE_MAX / 2) / elt) return 0;
        c *= 2;
    }
    void *nv = tv_realloc(*v, used * elt, *cap * elt, c * elt);
    if (!nv) return 0;
    *v = nv;
    *cap = c;
    return 1;
}

#define FREE_VEC(vec) tv_free((vec).v, (vec).cap * sizeof(*(vec).v))

#define PUSH(vec, x)                                                                                     \
    (((vec).n < (vec).cap || grow((void **)&(vec).v, &(vec).cap, (vec).n, (vec).n + 1, sizeof(*(vec).v))) \
         ? ((vec).v[(vec).n++] = (x), 1)                                                                  \
         : 0)

static int append(tv_u8 *b, const uint8_t *s, size_t n) {
    if (!grow((void **)&b->v, &b->cap, b->n, b->n + n, 1)) return 0;
    if (n) memcpy(b->v + b->n, s, n);
    b->n += n;
    return 1;
}

static int fail(cur *c, int err) {
    if (!c->err) c->err = err;
    return 0;
}

/* a[0:n] == b[0:n] for n <= 16, by a few overlapping word loads (never past either end):
 * for member names and short values a call to memcmp costs more than the comparison */
static INLINE int eq_short(const uint8_t *a, const uint8_t *b, size_t n) {
    if (n >= 8) {
        uint64_t x, y, z, w;
        memcpy(&x, a, 8), memcpy(&y, b, 8), memcpy(&z, a + n - 8, 8), memcpy(&w, b + n - 8, 8);
        return x == y && z == w;
    }
    if (n >= 4) {
        uint32_t x, y, z, w;
        memcpy(&x, a, 4), memcpy(&y, b, 4), memcpy(&z, a + n - 4, 4), memcpy(&w, b + n - 4, 4);
        return x == y && z == w;
    }
    return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

static int eq(const uint8_t *a, const uint8_t *b, size_t n) {
    return n <= 16 ? eq_short(a, b, n) : memcmp(a, b, n) == 0;
}

/* ---- intern tables ---------------------------------------------------- */

static uint64_t hash_bytes(const uint8_t *s, size_t n, uint64_t seed) {
    uint64_t h = seed ^ (n * 0x9E3779B97F4A7C15ULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    return h;
}

static int table_rehash(tv_table *t, size_t nslots) {
    int32_t *slots = malloc(nslots * sizeof *slots);
    if (!slots) return 0;
    memset(slots, 0xff, nslots * sizeof *slots);
    for (size_t i = 0; i < t->n; i++) {
        size_t at = t->e[i].hash & (nslots - 1);
        while (slots[at] >= 0) at = (at + 1) & (nslots - 1);
        slots[at] = (int32_t)i;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 1;
}

/* Whether entry e of t holds (kind, s[0:n] or ival). */
static INLINE int same(const tv_table *t, const tv_entry *e, uint8_t kind, const uint8_t *s, size_t n, int64_t ival) {
    if (e->kind != kind) return 0;
    if (kind == TV_KIND_INT) return e->ival == ival;
    if (e->len != n) return 0;
    return n == 0 || eq(t->arena.v + e->off, s, n);  /* an empty arena may be NULL: no offset from it */
}

static int32_t intern_slow(tv_table *t, uint8_t kind, const uint8_t *s, size_t n, int64_t ival);

/* The code of (kind, bytes or int) in ``t``, adding it if new; -1 when out of memory.
 * Consecutive events often repeat a value: that check is inline, the table's lookup is not. */
static INLINE int32_t intern(tv_table *t, uint8_t kind, const uint8_t *s, size_t n, int64_t ival) {
    if (t->last && same(t, &t->e[t->last - 1], kind, s, n, ival)) return (int32_t)(t->last - 1);
    return intern_slow(t, kind, s, n, ival);
}

static int32_t intern_slow(tv_table *t, uint8_t kind, const uint8_t *s, size_t n, int64_t ival) {
    uint64_t h = kind == TV_KIND_INT ? hash_bytes((const uint8_t *)&ival, 8, 1) : hash_bytes(s, n, kind);
    if ((t->n + 1) * 2 > t->nslots) {
        if (t->n >= INT32_MAX / 2 || !table_rehash(t, t->nslots ? t->nslots * 2 : 64)) return -1;
    }
    size_t at = h & (t->nslots - 1);
    for (int32_t i; (i = t->slots[at]) >= 0; at = (at + 1) & (t->nslots - 1)) {
        if (t->e[i].hash == h && same(t, &t->e[i], kind, s, n, ival)) {
            t->last = (size_t)i + 1;
            return i;
        }
    }
    tv_entry e = {h, ival, t->arena.n, n, kind};
    if (kind != TV_KIND_INT && !append(&t->arena, s, n)) return -1;
    if (!grow((void **)&t->e, &t->cap, t->n, t->n + 1, sizeof *t->e)) return -1;
    t->e[t->n] = e;
    t->slots[at] = (int32_t)t->n;
    t->last = t->n + 1;
    return (int32_t)t->n++;
}

/* ---- lexing ----------------------------------------------------------- */

static const uint8_t *ws(const uint8_t *p, const uint8_t *end) {
    if (p < end && *p > ' ') return p;  /* the usual case: no whitespace at all */
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 if invalid:
 * no overlong forms, no surrogates, nothing past U+10FFFF. */
static size_t utf8_len(const uint8_t *p, const uint8_t *end) {
    uint8_t b = p[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else
        return 0;
    if ((size_t)(end - p) <= need) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k <= need; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return 0;
    return need + 1;
}

static int hex4(const uint8_t *p, const uint8_t *end, unsigned *out) {
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t ch = p[k];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
        else return 0;
    }
    *out = v;
    return 1;
}

static int put_utf8(tv_u8 *b, unsigned cp) {
    uint8_t u[4];
    size_t n;
    if (cp < 0x80) u[0] = (uint8_t)cp, n = 1;
    else if (cp < 0x800) u[0] = 0xC0 | (cp >> 6), u[1] = 0x80 | (cp & 0x3F), n = 2;
    else if (cp < 0x10000)
        u[0] = 0xE0 | (cp >> 12), u[1] = 0x80 | ((cp >> 6) & 0x3F), u[2] = 0x80 | (cp & 0x3F), n = 3;
    else
        u[0] = 0xF0 | (cp >> 18), u[1] = 0x80 | ((cp >> 12) & 0x3F), u[2] = 0x80 | ((cp >> 6) & 0x3F),
        u[3] = 0x80 | (cp & 0x3F), n = 4;
    return append(b, u, n);
}

/* One escape at p ('\\'): its decoded bytes appended to scratch; the position after it, or NULL. */
static const uint8_t *unescape(cur *c, const uint8_t *p) {
    const uint8_t *end = c->end;
    if (end - p < 2) return NULL;
    uint8_t e = p[1], b;
    switch (e) {
    case '"': b = '"'; break;
    case '\\': b = '\\'; break;
    case '/': b = '/'; break;
    case 'b': b = '\b'; break;
    case 'f': b = '\f'; break;
    case 'n': b = '\n'; break;
    case 'r': b = '\r'; break;
    case 't': b = '\t'; break;
    case 'u': {
        unsigned cp, lo;
        if (!hex4(p + 2, end, &cp)) return NULL;
        p += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return NULL;  /* a lone low surrogate */
        if (cp >= 0xD800 && cp <= 0xDBFF) {             /* needs its low half next */
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo)) return NULL;
            if (lo < 0xDC00 || lo > 0xDFFF) return NULL;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
        }
        return put_utf8(&c->scratch, cp) ? p : (fail(c, TV_NOMEM), NULL);
    }
    default: return NULL;
    }
    return append(&c->scratch, &b, 1) ? p + 2 : (fail(c, TV_NOMEM), NULL);
}

/* The first byte at or after p that ends a run of plain string text: '"', '\\', a control
 * character or a non-ASCII byte (end when there is none). 16 bytes at a time where SSE2 is. */
static INLINE const uint8_t *plain_run(const uint8_t *p, const uint8_t *end) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        /* signed compare: bytes >= 0x80 are negative, so "< 0x20" also finds non-ASCII */
        __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, slash)),
                                   _mm_cmplt_epi8(x, space));
        int mask = _mm_movemask_epi8(hit);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80) p++;
    return p;
}

/* The string at c->p ('"') into *v (kind V_STR); 0 on a bail. Text without escapes stays
 * where it is; with escapes it is decoded into the scratch buffer. */
static INLINE int parse_string(cur *c, val *v) {
    const uint8_t *p = c->p + 1, *end = c->end, *start = p;
    for (;;) {
        p = plain_run(p, end);
        if (p >= end) return fail(c, TV_BAIL);
        uint8_t ch = *p;
        if (ch == '"') {
            v->kind = V_STR, v->in_scratch = 0, v->sp = start, v->sn = (size_t)(p - start);
            c->p = p + 1;
            return 1;
        }
        if (ch == '\\') break;
        if (ch < 0x20) return fail(c, TV_BAIL);
        if (ch < 0x80) {
            p++;
        } else {
            size_t k = utf8_len(p, end);
            if (!k) return fail(c, TV_BAIL);
            p += k;
        }
    }
    size_t off = c->scratch.n;
    if (!append(&c->scratch, start, (size_t)(p - start))) return fail(c, TV_NOMEM);
    for (;;) {
        if (p >= end) return fail(c, TV_BAIL);
        uint8_t ch = *p;
        if (ch == '"') break;
        if (ch == '\\') {
            p = unescape(c, p);
            if (!p) return fail(c, TV_BAIL);
        } else if (ch < 0x20) {
            return fail(c, TV_BAIL);
        } else {
            size_t k = ch < 0x80 ? 1 : utf8_len(p, end);
            if (!k) return fail(c, TV_BAIL);
            if (!append(&c->scratch, p, k)) return fail(c, TV_NOMEM);
            p += k;
        }
    }
    v->kind = V_STR, v->in_scratch = 1, v->soff = off, v->sn = c->scratch.n - off;
    c->p = p + 1;
    return 1;
}

static const uint8_t *str_bytes(const cur *c, const val *v) {
    return v->in_scratch ? c->scratch.v + v->soff : v->sp;
}

/* The value of 8 ASCII digits at p, or -1 if they are not all digits (SWAR, little-endian). */
static int64_t eight_digits(const uint8_t *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t lo = w - 0x3030303030303030ULL, hi = w + 0x4646464646464646ULL;
    if ((lo | hi) & 0x8080808080808080ULL) return -1;  /* a byte below '0' or above '9' */
    lo = lo * 10 + (lo >> 8);
    lo = (((lo & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
          (((lo >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
    return (int64_t)lo;
#else
    (void)p;
    return -1;
#endif
}

static const uint64_t POW10[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};

/* How many of the 8 bytes at p are ASCII digits before the first that is not (0-7: the caller
 * knows one of them is not). The lowest byte flagged is exactly the first non-digit: a borrow
 * or carry between bytes only starts at a flagged byte and only reaches the ones above it. */
static size_t digits_before_other(const uint8_t *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t bad = ((w - 0x3030303030303030ULL) | (w + 0x4646464646464646ULL)) & 0x8080808080808080ULL;
    return bad ? (size_t)__builtin_ctzll(bad) / 8 : 8;
#else
    (void)p;
    return 0;
#endif
}

/* The value of the k (1-7) digits at p, 8 bytes readable there: shifted up to the top of a
 * word of '0's, which eight_digits reads as the same number. */
static int64_t last_digits(const uint8_t *p, size_t k) {
    uint64_t w;
    uint8_t b[8];
    memcpy(&w, p, 8);
    w = (w << (8 * (8 - k))) | (0x3030303030303030ULL >> (8 * k));
    memcpy(b, &w, 8);
    return eight_digits(b);
}

typedef struct {
    int neg, has_exp;
    const uint8_t *ip, *fp;  /* integer and fraction digits */
    size_t in, fn, len;
    int64_t whole, frac;     /* their values, where in <= MAX_INT_DIGITS and fn <= 3 */
} num;

/* A JSON number at p: its parts, and the position after it; NULL if it is not one. The
 * values of short digit runs are taken in the same pass (most numbers are ids and times). */
static INLINE const uint8_t *scan_number(const uint8_t *p, const uint8_t *end, num *m) {
    const uint8_t *s = p;
    uint64_t v = 0;  /* unsigned: past 19 digits it wraps (defined), and is not used */
    m->neg = 0, m->has_exp = 0, m->fn = 0, m->frac = 0;
    if (p < end && *p == '-') m->neg = 1, p++;
    if (p >= end) return NULL;
    m->ip = p;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        for (int64_t d; end - p >= 8 && (d = eight_digits(p)) >= 0; p += 8) v = v * 100000000u + (uint64_t)d;
        size_t k = end - p >= 8 ? digits_before_other(p) : 0;
        if (k) {  /* the last 1-7 digits in one step */
            v = v * POW10[k] + (uint64_t)last_digits(p, k);
            p += k;
        }
        for (; p < end && *p >= '0' && *p <= '9'; p++) v = v * 10 + (uint64_t)(*p - '0');
    } else {
        return NULL;
    }
    m->in = (size_t)(p - m->ip);
    m->whole = m->in <= MAX_INT_DIGITS ? (int64_t)v : 0;
    m->fp = p;
    if (p < end && *p == '.') {
        m->fp = ++p;
        for (v = 0; p < end && *p >= '0' && *p <= '9'; p++) v = v * 10 + (uint64_t)(*p - '0');
        m->fn = (size_t)(p - m->fp);
        m->frac = m->fn <= 3 ? (int64_t)v : 0;
        if (!m->fn) return NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        m->has_exp = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const uint8_t *d = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == d) return NULL;
    }
    m->len = (size_t)(p - s);
    return p;
}

/* An int token that surely fits int64 (no fraction, no exponent, at most MAX_INT_DIGITS digits). */
static int num_int(const num *m, int64_t *out) {
    if (m->fn || m->has_exp || m->in > MAX_INT_DIGITS) return 0;
    *out = m->neg ? -m->whole : m->whole;
    return 1;
}

/* Microseconds -> exact nanoseconds, for the tokens every path of times_ns converts alike
 * (at most 3 fraction digits, no exponent, below TIME_LIMIT_US). */
static int num_ns(const num *m, int64_t *out) {
    if (m->has_exp || m->fn > 3 || m->in > MAX_TIME_DIGITS || m->whole >= TIME_LIMIT_US) return 0;
    int64_t frac = m->frac;
    for (size_t k = m->fn; k < 3; k++) frac *= 10;
    int64_t v = m->whole * 1000 + frac;
    *out = m->neg ? -v : v;
    return 1;
}

static int literal(cur *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return fail(c, TV_BAIL);
    c->p += n;
    return 1;
}

/* Skip one value at c->p, checking its grammar, without recursion. ``strict``: also bail on
 * numbers msgspec may refuse when it decodes them (exponents, very long ones). */
static int skip_value(cur *c, int strict) {
    uint8_t stack[MAX_DEPTH];
    int depth = 0;
    num m;
    val scratch_v;
    size_t mark = c->scratch.n;
    const uint8_t *end = c->end;
value:
    c->p = ws(c->p, end);
    if (c->p >= end) return fail(c, TV_BAIL);
    switch (*c->p) {
    case '{':
        if (depth == MAX_DEPTH) return fail(c, TV_BAIL);
        stack[depth++] = '}';
        c->p = ws(c->p + 1, end);
        if (c->p < end && *c->p == '}') {
            c->p++;
            goto closed;
        }
        goto key;
    case '[':
        if (depth == MAX_DEPTH) return fail(c, TV_BAIL);
        stack[depth++] = ']';
        c->p = ws(c->p + 1, end);
        if (c->p < end && *c->p == ']') {
            c->p++;
            goto closed;
        }
        goto value;
    case '"':
        if (!parse_string(c, &scratch_v)) return 0;
        c->scratch.n = mark;  /* skipped text is not kept */
        goto after;
    case 't':
        if (!literal(c, "true", 4)) return 0;
        goto after;
    case 'f':
        if (!literal(c, "false", 5)) return 0;
        goto after;
    case 'n':
        if (!literal(c, "null", 4)) return 0;
        goto after;
    default: {
        const uint8_t *q = scan_number(c->p, end, &m);
        if (!q || (strict && (m.has_exp || m.len > MAX_ANY_NUMBER))) return fail(c, TV_BAIL);
        c->p = q;
        goto after;
    }
    }
key:
    if (c->p >= end || *c->p != '"' || !parse_string(c, &scratch_v)) return fail(c, TV_BAIL);
    c->scratch.n = mark;
    c->p = ws(c->p, end);
    if (c->p >= end || *c->p != ':') return fail(c, TV_BAIL);
    c->p++;
    goto value;
after:
    if (depth == 0) return 1;
    c->p = ws(c->p, end);
    if (c->p >= end) return fail(c, TV_BAIL);
    if (*c->p == ',') {
        c->p = ws(c->p + 1, end);
        if (stack[depth - 1] == '}') goto key;
        goto value;
    }
    if (*c->p != stack[depth - 1]) return fail(c, TV_BAIL);
    c->p++;
closed:
    depth--;
    goto after;
}

/* ---- typed values ----------------------------------------------------- */

static int is_null(const cur *c) {
    return c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0;
}

/* str (or null, when allowed) */
static INLINE int get_str(cur *c, val *v, int nullable) {
    if (c->p < c->end && *c->p == '"') return parse_string(c, v);
    if (nullable && is_null(c)) {
        c->p += 4;
        v->kind = V_NULL;
        return 1;
    }
    return fail(c, TV_BAIL);
}

/* A number token at c->p, or a bail. */
static int get_number(cur *c, num *m) {
    const uint8_t *q = scan_number(c->p, c->end, m);
    if (!q) return fail(c, TV_BAIL);
    c->p = q;
    return 1;
}

enum { R_INT_NULL, R_INT_STR_NULL, R_ANY_INT, R_TIME, R_NAME, R_RAW, R_STR, R_STR_NULL, R_SKIP };

/* One field's value at c->p by its rule (what type msgspec declares for it). */
static int get_value(cur *c, val *v, int rule) {
    num m;
    const uint8_t *start = c->p;
    if (c->p >= c->end) return fail(c, TV_BAIL);
    uint8_t ch = *c->p;
    switch (rule) {
    case R_STR: return get_str(c, v, 0);
    case R_STR_NULL: return get_str(c, v, 1);
    case R_RAW:
        if (!skip_value(c, 0)) return 0;
        v->kind = V_OTHER, v->sp = start, v->sn = (size_t)(c->p - start);
        return 1;
    case R_SKIP: return skip_value(c, 0);
    case R_NAME:
        if (ch == '"' || ch == 'n') return get_str(c, v, 1);
        if (!skip_value(c, 1)) return 0;
        v->kind = V_OTHER;
        return 1;
    default: break;
    }
    if (ch == 'n' && is_null(c)) {
        c->p += 4;
        v->kind = V_NULL;
        return 1;
    }
    if (ch == '"') {
        if (rule != R_INT_STR_NULL && rule != R_ANY_INT) return fail(c, TV_BAIL);
        return parse_string(c, v);
    }
    if (!get_number(c, &m)) return 0;
    int ok = rule == R_TIME ? num_ns(&m, &v->i) : num_int(&m, &v->i);
    if (!ok) return fail(c, TV_BAIL);  /* float for an int, big int, inexact time */
    v->kind = V_INT;
    return 1;
}

/* ---- events ----------------------------------------------------------- */

enum { K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ID, K_BP, K_ARGS, N_KEYS };
#define N_ARGS (TV_X_INTS + 4 + TV_M_INTS + 1)

/* a member name, its length and its rule (-1: the args object) */
typedef struct {
    const char *s;
    size_t n;
    int rule;
} key;
#define KEY(text, rule) {text, sizeof(text) - 1, rule}

/* the fields of events.py's Event, in the K_ order */
static const key EVENT_KEYS[N_KEYS] = {
    KEY("ph", R_STR), KEY("cat", R_STR_NULL), KEY("name", R_NAME), KEY("pid", R_INT_STR_NULL),
    KEY("tid", R_INT_STR_NULL), KEY("ts", R_TIME), KEY("dur", R_TIME), KEY("id", R_INT_STR_NULL),
    KEY("bp", R_STR_NULL), KEY("args", -1)};

/* the fields of events.py's Args: TV_X_INTS int args, the 4 raw-text args, TV_M_INTS [memory]
 * args, and name (decoded as Any, unused) */
static const key ARG_KEYS[N_ARGS] = {
    KEY("correlation", R_INT_NULL), KEY("External id", R_INT_NULL), KEY("external id", R_INT_NULL),
    KEY("device", R_INT_STR_NULL), KEY("stream", R_INT_STR_NULL), KEY("bytes", R_ANY_INT),
    KEY("Python id", R_ANY_INT), KEY("Python parent id", R_ANY_INT),
    KEY("Input Dims", R_RAW), KEY("Input type", R_RAW), KEY("Concrete Inputs", R_RAW), KEY("Call stack", R_RAW),
    KEY("Addr", R_ANY_INT), KEY("Bytes", R_ANY_INT), KEY("Total Allocated", R_ANY_INT),
    KEY("Total Reserved", R_ANY_INT), KEY("Device Type", R_ANY_INT), KEY("Device Id", R_ANY_INT),
    KEY("name", R_NAME)};

typedef struct {
    val f[N_KEYS];
    val a[N_ARGS];
} event;

/* Where a member name may be ours: its slot by KEY_SLOT (of its first and last bytes and its
 * length), which holds the index of the one name of ours there, -1 where none is. Most member
 * names of a real event's args are none of ours; one look rejects them, and one comparison
 * finds the others, without a loop over candidates (whose branches the CPU kept mispredicting:
 * a fifth of the scan's mispredictions). No two of a table's names share a slot, and every
 * name is 1-16 bytes long: tv_check_tables() checks these tables against the names (the
 * module refuses to load, and the fuzzer to run, if they disagree). */
#define KEY_SLOTS 64
#define KEY_SLOT(first, last, len) (((size_t)(first) + 3 * (size_t)(last) + 25 * (size_t)(len)) & (KEY_SLOTS - 1))
static const int8_t EVENT_SLOTS[KEY_SLOTS] = {
    -1, 2, -1, -1, -1, 6, -1, 7, -1, -1, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, 0, -1, -1, -1, 9, -1, -1, -1, -1, -1, 8, -1, -1, 3, -1, -1, -1, 4,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 5};
static const int8_t ARG_SLOTS[KEY_SLOTS] = {
    0, 18, -1, -1, 1, -1, 16, -1, -1, -1, -1, -1, 7, -1, -1, -1, 4, 17, -1, 10, -1, -1,
    -1, -1, 13, -1, -1, -1, 8, 6, 15, -1, -1, -1, -1, -1, 2, -1, -1, -1, -1, 3, -1, -1,
    -1, -1, -1, -1, -1, -1, 9, -1, -1, -1, -1, 14, 5, -1, -1, 12, -1, -1, 11, -1};

static INLINE int find_key(const key *keys, const int8_t *slots, const uint8_t *s, size_t len) {
    if (len - 1 >= 16) return -1;  /* empty (wraps) or longer than any of ours */
    int k = slots[KEY_SLOT(s[0], s[len - 1], len)];
    return k >= 0 && keys[k].n == len && eq_short((const uint8_t *)keys[k].s, s, len) ? k : -1;
}

static int check_slots(const key *keys, int n, const int8_t *slots) {
    for (int k = 0; k < n; k++) {
        size_t len = keys[k].n;
        if (len < 1 || len > 16) return 0;
        if (slots[KEY_SLOT((uint8_t)keys[k].s[0], (uint8_t)keys[k].s[len - 1], len)] != k) return 0;
    }
    for (int i = 0; i < KEY_SLOTS; i++) {  /* and nothing else in the table */
        int k = slots[i];
        if (k >= n || (k >= 0 && KEY_SLOT((uint8_t)keys[k].s[0], (uint8_t)keys[k].s[keys[k].n - 1], keys[k].n) != (size_t)i))
            return 0;
        if (k < -1) return 0;
    }
    return 1;
}

int tv_check_tables(void) {
    return check_slots(EVENT_KEYS, N_KEYS, EVENT_SLOTS) && check_slots(ARG_KEYS, N_ARGS, ARG_SLOTS);
}

/* The members of the object at c->p into vals by their key, unknown ones skipped; the args
 * member of an event goes into ev->a. */
static int parse_object(cur *c, val *vals, const key *keys, const int8_t *slots, event *ev) {
    uint32_t seen = 0;
    const uint8_t *end = c->end;
    c->p = ws(c->p + 1, end);
    if (c->p < end && *c->p == '}') {
        c->p++;
        return 1;
    }
    for (;;) {
        val k;
        if (c->p >= end || *c->p != '"' || !parse_string(c, &k)) return fail(c, TV_BAIL);
        if (k.in_scratch) return fail(c, TV_BAIL);  /* an escaped key: msgspec matches it decoded */
        if (c->p < end && *c->p == ':') {  /* compact JSON: no whitespace around the colon */
            c->p++;
        } else {
            c->p = ws(c->p, end);
            if (c->p >= end || *c->p != ':') return fail(c, TV_BAIL);
            c->p++;
        }
        c->p = ws(c->p, end);
        int idx = find_key(keys, slots, k.sp, k.sn);
        if (idx < 0) {
            if (!skip_value(c, 0)) return 0;
        } else {
            if (seen & (1u << idx)) return fail(c, TV_BAIL);  /* duplicate: msgspec keeps the last */
            seen |= 1u << idx;
            if (keys[idx].rule >= 0) {
                if (!get_value(c, &vals[idx], keys[idx].rule)) return 0;
            } else if (c->p < end && *c->p == '{') {  /* args */
                if (!parse_object(c, ev->a, ARG_KEYS, ARG_SLOTS, ev)) return 0;
            } else if (is_null(c)) {
                c->p += 4;
            } else {
                return fail(c, TV_BAIL);
            }
        }
        c->p = ws(c->p, end);
        if (c->p >= end) return fail(c, TV_BAIL);
        if (*c->p == '}') {
            c->p++;
            return 1;
        }
        if (*c->p != ',') return fail(c, TV_BAIL);
        c->p = ws(c->p + 1, end);
    }
}

/* ---- emitting columns ------------------------------------------------- */

/* The code of an id-like value (int or str; -1 for null or absent), or -2 when out of memory. */
static INLINE int32_t code_of(cur *c, tv_table *t, const val *v) {
    int32_t got;
    if (v->kind == V_INT) got = intern(t, TV_KIND_INT, NULL, 0, v->i);
    else if (v->kind == V_STR) got = intern(t, TV_KIND_STR, str_bytes(c, v), v->sn, 0);
    else if (v->kind == V_OTHER) got = intern(t, TV_KIND_RAW, v->sp, v->sn, 0);
    else return -1;
    return got < 0 ? -2 : got;
}

static INLINE int push_code(cur *c, tv_i32 *codes, tv_table *t, const val *v) {
    int32_t code = code_of(c, t, v);
    if (code == -2 || !PUSH(*codes, code)) return fail(c, TV_NOMEM);
    return 1;
}

/* An int field's value (0 where masked) and mask. Values are stored only from the first that
 * is not 0 (the zeros before it written then): a column that holds no int in the chunk (the
 * 2021 external id, most Python ids) keeps no memory, its ``n`` 0 against the mask's rows. */
static INLINE int push_int(cur *c, tv_i64 *vals, tv_u8 *mask, const val *v) {
    int ok = v->kind == V_INT;
    int64_t x = ok ? v->i : 0;
    if (x != 0 || vals->n) {
        if (vals->n < mask->n) {  /* the first value that is not 0: its zeros before it */
            if (!grow((void **)&vals->v, &vals->cap, 0, mask->n + 1, sizeof *vals->v))
                return fail(c, TV_NOMEM);
            memset(vals->v, 0, mask->n * sizeof *vals->v);
            vals->n = mask->n;
        }
        if (!PUSH(*vals, x)) return fail(c, TV_NOMEM);
    }
    if (!PUSH(*mask, (uint8_t)!ok)) return fail(c, TV_NOMEM);
    return 1;
}

static int64_t ns_of(const val *v) {
    return v->kind == V_INT ? v->i : TV_MISSING;
}

static int emit_x(cur *c, tv_result *r, const event *ev) {
    static const int field[4] = {K_CAT, K_NAME, K_PID, K_TID};
    if (ev->f[K_NAME].kind == V_OTHER) return fail(c, TV_BAIL);  /* a non-string name */
    if (!PUSH(r->x_ts, ns_of(&ev->f[K_TS])) || !PUSH(r->x_dur, ns_of(&ev->f[K_DUR])))
        return fail(c, TV_NOMEM);
    for (int k = 0; k < 4; k++)
        if (!push_code(c, &r->x_codes[k], &r->tables[T_X_CAT + k], &ev->f[field[k]])) return 0;
    for (int k = 0; k < 4; k++)  /* the raw JSON text of Input Dims, ...; absent: missing */
        if (!push_code(c, &r->x_codes[4 + k], &r->tables[T_X_INPUT_DIMS + k], &ev->a[TV_X_INTS + k]))
            return 0;
    for (int k = 0; k < TV_X_INTS; k++)
        if (!push_int(c, &r->x_int[k], &r->x_mask[k], &ev->a[k])) return 0;
    return 1;
}

static int emit_flow(cur *c, tv_result *r, const event *ev) {
    static const int field[TV_F_TABLES] = {K_PH, K_CAT, K_ID, K_PID, K_TID};
    if (!PUSH(r->f_ts, ns_of(&ev->f[K_TS]))) return fail(c, TV_NOMEM);
    for (int k = 0; k < TV_F_TABLES; k++)
        if (!push_code(c, &r->f_codes[k], &r->tables[T_F_PH + k], &ev->f[field[k]])) return 0;
    return 1;
}

static int emit_memory(cur *c, tv_result *r, const event *ev) {
    if (!PUSH(r->m_ts, ns_of(&ev->f[K_TS]))) return fail(c, TV_NOMEM);
    if (!push_code(c, &r->m_codes[0], &r->tables[T_M_PID], &ev->f[K_PID])) return 0;
    if (!push_code(c, &r->m_codes[1], &r->tables[T_M_TID], &ev->f[K_TID])) return 0;
    for (int k = 0; k < TV_M_INTS; k++)
        if (!push_int(c, &r->m_int[k], &r->m_mask[k], &ev->a[TV_X_INTS + 4 + k])) return 0;
    return 1;
}

static int emit(cur *c, tv_result *r, const event *ev) {
    const val *ph = &ev->f[K_PH];
    const uint8_t *php = ph->kind == V_STR ? str_bytes(c, ph) : (const uint8_t *)"";
    size_t phn = ph->kind == V_STR ? ph->sn : 0;
    int32_t code = intern(&r->tables[T_PHASE], TV_KIND_STR, php, phn, 0);
    if (code < 0) return fail(c, TV_NOMEM);
    if ((size_t)code == r->phase_counts.n) {
        if (!PUSH(r->phase_counts, 0)) return fail(c, TV_NOMEM);
    }
    r->phase_counts.v[code]++;
    r->n_events++;
    if (phn != 1) return 1;
    uint8_t kind = php[0];
    if (kind == 'X') return emit_x(c, r, ev);
    if (kind == 's' || kind == 'f' || kind == 't') return emit_flow(c, r, ev);
    if (kind == 'i' || kind == 'I') {
        const val *name = &ev->f[K_NAME];
        if (name->kind == V_STR && name->sn == 8 && memcmp(str_bytes(c, name), "[memory]", 8) == 0)
            return emit_memory(c, r, ev);
    }
    return 1;
}

/* ---- the chunk -------------------------------------------------------- */

void tv_result_init(tv_result *out) {
    memset(out, 0, sizeof *out);
}

void tv_result_free(tv_result *r) {
    for (int k = 0; k < TV_NTABLES; k++) {
        tv_free(r->tables[k].e, r->tables[k].cap * sizeof *r->tables[k].e);
        free(r->tables[k].slots);
        FREE_VEC(r->tables[k].arena);
    }
    FREE_VEC(r->phase_counts);
    FREE_VEC(r->x_ts);
    FREE_VEC(r->x_dur);
    FREE_VEC(r->f_ts);
    FREE_VEC(r->m_ts);
    for (int k = 0; k < TV_X_TABLES; k++) FREE_VEC(r->x_codes[k]);
    for (int k = 0; k < TV_F_TABLES; k++) FREE_VEC(r->f_codes[k]);
    for (int k = 0; k < TV_M_TABLES; k++) FREE_VEC(r->m_codes[k]);
    for (int k = 0; k < TV_X_INTS; k++) FREE_VEC(r->x_int[k]), FREE_VEC(r->x_mask[k]);
    for (int k = 0; k < TV_M_INTS; k++) FREE_VEC(r->m_int[k]), FREE_VEC(r->m_mask[k]);
    tv_result_init(r);
}

/* The items loop of tv_scan and tv_scan_open. ``closed_at``: NULL for a chunk between its
 * brackets; else the chunk may hold the array's own ']', whose offset is stored there
 * (TV_NOT_CLOSED when the text ends after an item first). */
static int scan_items(const uint8_t *p, size_t n, tv_result *out, size_t *closed_at) {
    cur c = {p, p + n, {NULL, 0, 0}, 0};
    event ev;
    if (closed_at) *closed_at = TV_NOT_CLOSED;
    c.p = ws(c.p, c.end);
    if (closed_at && c.p < c.end && *c.p == ']') {  /* an empty array */
        *closed_at = (size_t)(c.p - p);
        return TV_OK;
    }
    while (c.p < c.end) {
        if (*c.p != '{') {  /* not an event object: msgspec drops it and counts it */
            c.err = TV_BAIL;
            break;
        }
        for (int k = 0; k < N_KEYS; k++) ev.f[k].kind = V_ABSENT;  /* every read of a val checks its kind */
        for (int k = 0; k < N_ARGS; k++) ev.a[k].kind = V_ABSENT;
        c.scratch.n = 0;
        if (!parse_object(&c, ev.f, EVENT_KEYS, EVENT_SLOTS, &ev) || !emit(&c, out, &ev)) break;
        c.p = ws(c.p, c.end);
        if (c.p >= c.end) break;
        if (closed_at && *c.p == ']') {
            *closed_at = (size_t)(c.p - p);
            break;
        }
        if (*c.p != ',') {
            c.err = TV_BAIL;
            break;
        }
        c.p = ws(c.p + 1, c.end);
        if (c.p >= c.end) c.err = TV_BAIL;  /* a trailing comma */
    }
    FREE_VEC(c.scratch);
    return c.err;
}

int tv_scan(const uint8_t *p, size_t n, tv_result *out) {
    return scan_items(p, n, out, NULL);
}

int tv_scan_open(const uint8_t *p, size_t n, tv_result *out, size_t *closed_at) {
    return scan_items(p, n, out, closed_at);
}

/* The top-level members before traceEvents: keys without escapes, values skipped with
 * their grammar checked. */
int64_t tv_find_events(const uint8_t *p, size_t n) {
    cur c = {p, p + n, {NULL, 0, 0}, 0};
    int64_t found = -1;
    c.p = ws(c.p, c.end);
    if (c.p >= c.end || *c.p != '{') return -1;
    c.p = ws(c.p + 1, c.end);
    for (;;) {
        val k;
        if (c.p >= c.end || *c.p != '"' || !parse_string(&c, &k) || k.in_scratch) break;
        c.p = ws(c.p, c.end);
        if (c.p >= c.end || *c.p != ':') break;
        c.p = ws(c.p + 1, c.end);
        if (k.sn == 11 && memcmp(k.sp, "traceEvents", 11) == 0) {
            if (c.p < c.end && *c.p == '[') found = (int64_t)(c.p - p);
            break;
        }
        if (!skip_value(&c, 0)) break;
        c.p = ws(c.p, c.end);
        if (c.p >= c.end || *c.p != ',') break;
        c.p = ws(c.p + 1, c.end);
    }
    FREE_VEC(c.scratch);
    return found;
}
