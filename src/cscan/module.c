/* traceview.read._cscan: the CPython face of the compiled scanner (scan.c).
 *
 * scan(buffer, lo, hi) scans the items of buffer[lo:hi] (the text between a chunk's
 * brackets) with the GIL released, so that threads decode chunks on every core, then
 * builds the few Python objects the columns need: the distinct values (str, int or
 * bytes) and one bytearray per column, which numpy views without a copy. It returns
 * None when the scanner bailed (the caller decodes that chunk with msgspec).
 * scan_open and find_events serve the reader's direct path (traceview/read/direct.py).
 * join(blocks) joins a column's chunk parts into one Block, taking over the memory of the
 * parts only it holds (tv_join; traceview/read/compiled.py: join_parts).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "scan.h"

/* A column's memory, handed over from the scanner's vector without a copy: a buffer numpy
 * views (np.frombuffer; writable, as the bytearray it replaces), freed when the last view
 * goes. A copy into a bytearray touched every page of the columns twice. */
typedef struct {
    PyObject_HEAD
    void *v;
    Py_ssize_t len;
    size_t cap;  /* bytes: what tv_free needs */
} Block;

/* tracemalloc's domain for the Blocks: it counts them as it counted the bytearrays (tests
 * measure the reader's peak with it) */
#define BLOCK_DOMAIN 0x74765f63u

static void block_dealloc(PyObject *self) {
    Block *b = (Block *)self;
    if (b->v) PyTraceMalloc_Untrack(BLOCK_DOMAIN, (uintptr_t)b->v);
    tv_free(b->v, b->cap);
    Py_TYPE(self)->tp_free(self);
}

static int block_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Block *b = (Block *)self;
    return PyBuffer_FillInfo(view, self, b->v ? b->v : (void *)"", b->len, 0, flags);
}

static PyBufferProcs block_as_buffer = {block_getbuffer, NULL};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "traceview.read._cscan.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = block_dealloc,
    .tp_as_buffer = &block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A column's memory from the scanner (a buffer numpy views).",
};

/* The vector's memory (n elements of elt bytes, cap of room) as a Block that owns it; the
 * vector is left empty, so that tv_result_free leaves it. Its room past n was never written:
 * it holds no page. */
static PyObject *take_block(void **v, size_t n, size_t *cap, size_t elt) {
    Block *b = PyObject_New(Block, &BlockType);
    if (!b) return NULL;
    b->v = *v;
    b->len = (Py_ssize_t)(n * elt);
    b->cap = *cap * elt;
    if (b->v) PyTraceMalloc_Track(BLOCK_DOMAIN, (uintptr_t)b->v, (size_t)b->len);
    *v = NULL;
    *cap = 0;
    return (PyObject *)b;
}

#define TAKE(vec) take_block((void **)&(vec).v, (vec).n, &(vec).cap, sizeof(*(vec).v))

static PyObject *uniques(const tv_table *t) {
    PyObject *out = PyList_New((Py_ssize_t)t->n);
    if (!out) return NULL;
    for (size_t i = 0; i < t->n; i++) {
        const tv_entry *e = &t->e[i];
        /* an arena that never held a byte is NULL: no pointer is formed from it then */
        const char *s = e->len ? (const char *)t->arena.v + e->off : "";
        PyObject *item;
        if (e->kind == TV_KIND_INT) item = PyLong_FromLongLong(e->ival);
        else if (e->kind == TV_KIND_STR) item = PyUnicode_DecodeUTF8(s, (Py_ssize_t)e->len, "strict");
        else item = PyBytes_FromStringAndSize(s, (Py_ssize_t)e->len);
        if (!item) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    return out;
}

/* [Block of int32 codes, ...] */
static PyObject *codes_list(tv_i32 *codes, int n) {
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *b = TAKE(codes[k]);
        if (!b) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, b);
    }
    return out;
}

/* [(Block of int64 values, Block of uint8 masks), ...]: values with no row where every one
 * is 0 (push_int in scan.c) */
static PyObject *ints_list(tv_i64 *vals, tv_u8 *masks, int n) {
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *pair = Py_BuildValue("(NN)", TAKE(vals[k]), TAKE(masks[k]));
        if (!pair) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, pair);
    }
    return out;
}

/* The columns' vectors are handed over (tv_result_free then frees what is left). */
static PyObject *build(tv_result *r) {
    PyObject *tables = PyList_New(TV_NTABLES);
    if (!tables) return NULL;
    for (int k = 0; k < TV_NTABLES; k++) {
        PyObject *u = uniques(&r->tables[k]);
        if (!u) {
            Py_DECREF(tables);
            return NULL;
        }
        PyList_SET_ITEM(tables, k, u);
    }
    /* N: the reference is handed over (and released if building the tuple fails) */
    return Py_BuildValue(
        "(nNNNNNNNNNN)", (Py_ssize_t)r->n_events, tables,
        TAKE(r->phase_counts), TAKE(r->x_ts), TAKE(r->x_dur),
        codes_list(r->x_codes, TV_X_TABLES), ints_list(r->x_int, r->x_mask, TV_X_INTS),
        TAKE(r->f_ts), codes_list(r->f_codes, TV_F_TABLES), TAKE(r->m_ts),
        Py_BuildValue("(NN)", codes_list(r->m_codes, TV_M_TABLES), ints_list(r->m_int, r->m_mask, TV_M_INTS)));
}

/* scan and scan_open: the chunk buffer[lo:hi] scanned with the GIL released; ``open``: the
 * text may hold the array's ']' (tv_scan_open), whose offset in buffer (or -1) comes first. */
static PyObject *scan_chunk(PyObject *args, int open, const char *bad_bounds) {
    Py_buffer view;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &lo, &hi)) return NULL;
    if (lo < 0 || hi < lo || hi > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, bad_bounds);
        return NULL;
    }
    tv_result r;
    tv_result_init(&r);
    size_t closed_at = TV_NOT_CLOSED;
    int rc;
    const uint8_t *p = (const uint8_t *)view.buf + lo;
    Py_BEGIN_ALLOW_THREADS
    rc = open ? tv_scan_open(p, (size_t)(hi - lo), &r, &closed_at) : tv_scan(p, (size_t)(hi - lo), &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *out;
    if (rc == TV_NOMEM) out = PyErr_NoMemory();
    else if (rc != TV_OK) out = Py_NewRef(Py_None);
    else if (!open) out = build(&r);
    else out = Py_BuildValue("(nN)", closed_at == TV_NOT_CLOSED ? (Py_ssize_t)-1 : lo + (Py_ssize_t)closed_at, build(&r));
    tv_result_free(&r);
    return out;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    return scan_chunk(args, 0, "scan: bounds outside the buffer");
}

/* scan_open(buffer, lo, hi): (offset of the array's ']' in buffer or -1, columns), or None. */
static PyObject *scan_open(PyObject *self, PyObject *args) {
    (void)self;
    return scan_chunk(args, 1, "scan_open: bounds outside the buffer");
}

/* join([Block, ...]): one Block of their bytes one after the other (tv_join). A Block that only
 * the list holds gives up its memory to the result (it is left empty): the caller has dropped
 * every view of it. One that something else holds too is copied from and left as it was. */
static PyObject *join(PyObject *self, PyObject *list) {
    (void)self;
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "join: a list of Blocks");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!Py_IS_TYPE(PyList_GET_ITEM(list, i), &BlockType)) {
            PyErr_SetString(PyExc_TypeError, "join: a list of Blocks");
            return NULL;
        }
    }
    tv_part *parts = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *parts);
    Block *out = PyObject_New(Block, &BlockType);
    if (out)  /* empty until filled: freed as such on any failure below */
        out->v = NULL, out->len = 0, out->cap = 0;
    if (!parts || !out) {
        PyMem_Free(parts);
        Py_XDECREF(out);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Block *b = (Block *)PyList_GET_ITEM(list, i);
        parts[i] = (tv_part){b->v, (size_t)b->len, b->cap, Py_REFCNT(b) == 1};
    }
    size_t cap = 0;
    void *d;
    Py_BEGIN_ALLOW_THREADS
    d = tv_join(parts, (size_t)n, &cap);
    Py_END_ALLOW_THREADS
    if (!d) {  /* nothing was taken */
        PyMem_Free(parts);
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Block *b = (Block *)PyList_GET_ITEM(list, i);
        len += b->len;
        if (parts[i].own) {  /* its memory is the result's now, or freed */
            if (b->v) PyTraceMalloc_Untrack(BLOCK_DOMAIN, (uintptr_t)b->v);
            b->v = NULL, b->len = 0, b->cap = 0;
        }
    }
    PyMem_Free(parts);
    out->v = d, out->len = len, out->cap = cap;
    PyTraceMalloc_Track(BLOCK_DOMAIN, (uintptr_t)d, (size_t)len);
    return (PyObject *)out;
}

static PyObject *find_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    int64_t at = tv_find_events((const uint8_t *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(at);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buffer, lo, hi): the columns of the events in buffer[lo:hi] (the items of a JSON "
     "array, without its brackets), or None where the compiled scanner leaves them to msgspec."},
    {"scan_open", scan_open, METH_VARARGS,
     "scan_open(buffer, lo, hi): scan() for text that may hold the array's closing ']': "
     "(its offset in buffer, or -1 where the text ends after an item first; columns), or None."},
    {"join", join, METH_O,
     "join(blocks): one Block of the Blocks' bytes one after the other; a Block only the list "
     "holds gives its memory up to it (left empty), the others are copied from."},
    {"find_events", find_events, METH_VARARGS,
     "find_events(buffer): the offset of the '[' of the document's traceEvents, or -1 where "
     "the head is not plain enough to tell (the caller splits the document with msgspec)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cscan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cscan(void) {
    if (!tv_check_tables()) {  /* the import fails and the reader uses msgspec */
        PyErr_SetString(PyExc_ImportError, "traceview.read._cscan: its field tables disagree");
        return NULL;
    }
    if (PyType_Ready(&BlockType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddObjectRef(m, "Block", (PyObject *)&BlockType) < 0) Py_CLEAR(m);
    return m;
}
