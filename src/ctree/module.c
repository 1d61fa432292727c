/* traceview._ctree: the CPython face of the compiled tree walks (tree.c).
 *
 * Every function takes numpy arrays (any C-contiguous buffer) for its inputs and fills
 * caller-allocated ones for its outputs, with the GIL released: no Python object per node.
 * A length that does not match, a parent outside [-1, n) or a loop of parents is a
 * ValueError; the walks that follow parents compute their order of nodes here, so no
 * index is followed that was not checked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "tree.h"

#define MAX_WALKS 8

/* n elements of ``elt`` bytes in the buffer, or a ValueError */
static int sized(const Py_buffer *b, size_t elt, Py_ssize_t n, const char *what) {
    if (b->len != (Py_ssize_t)(n * elt)) {
        PyErr_Format(PyExc_ValueError, "%s: wrong length", what);
        return 0;
    }
    return 1;
}

static PyObject *done(int rc, const char *what) {
    if (rc == TREE_NOMEM) return PyErr_NoMemory();
    if (rc != TREE_OK) {
        PyErr_Format(PyExc_ValueError, "%s: not a forest", what);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* open_depths(ks, ke, depth_out, up_out) */
static PyObject *open_depths(PyObject *self, PyObject *args) {
    Py_buffer ks, ke, depth, up;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*w*w*", &ks, &ke, &depth, &up)) return NULL;
    Py_ssize_t n = ks.len / 8;
    int rc = TREE_BAD;
    if (ks.len % 8) PyErr_SetString(PyExc_ValueError, "open_depths: wrong length");
    else if (sized(&ke, 8, n, "open_depths") && sized(&depth, 8, n, "open_depths") &&
        sized(&up, 8, n, "open_depths")) {
        Py_BEGIN_ALLOW_THREADS
        rc = tree_open_depths(ks.buf, ke.buf, (size_t)n, depth.buf, up.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&ks), PyBuffer_Release(&ke), PyBuffer_Release(&depth), PyBuffer_Release(&up);
    return PyErr_Occurred() ? NULL : done(rc, "open_depths");
}

/* The parents-first order of the forest in ``parent`` (n nodes), or NULL with the error set. */
static int64_t *ordered(const Py_buffer *parent, size_t n) {
    int64_t *order = malloc((n ? n : 1) * sizeof *order);
    int rc = TREE_NOMEM;
    if (order) {
        Py_BEGIN_ALLOW_THREADS
        rc = tree_order(parent->buf, n, order);
        Py_END_ALLOW_THREADS
    }
    if (rc == TREE_OK) return order;
    free(order);
    done(rc, "parents");
    return NULL;
}

/* walk(parent, kind, buffers): one order of the forest, then per buffer one walk of ``kind``:
 * "nearest" / "farthest" (buffers: (marks as uint8, out) pairs), "depth" (out), "sum" (in place). */
static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer parent, bufs[2 * MAX_WALKS];
    const char *kind;
    PyObject *items;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*sO!", &parent, &kind, &PyTuple_Type, &items)) return NULL;
    Py_ssize_t n = parent.len / 8, k = PyTuple_GET_SIZE(items), got = 0;
    int pairs = strcmp(kind, "nearest") == 0 || strcmp(kind, "farthest") == 0;
    int ok = parent.len % 8 == 0 && k <= (pairs ? 2 : 1) * MAX_WALKS && (!pairs || k % 2 == 0) &&
             (pairs || strcmp(kind, "depth") == 0 || strcmp(kind, "sum") == 0);
    if (!ok) PyErr_SetString(PyExc_ValueError, "walk: bad arguments");
    while (ok && got < k) {
        int marks = pairs && got % 2 == 0;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(items, got), &bufs[got], marks ? PyBUF_SIMPLE : PyBUF_WRITABLE))
            break;  /* the error is set */
        ok = sized(&bufs[got++], marks ? 1 : 8, n, "walk");
    }
    ok = ok && got == k;
    int64_t *order = ok ? ordered(&parent, (size_t)n) : NULL;
    if (order) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < k; i += pairs ? 2 : 1) {
            if (pairs)
                tree_marked(parent.buf, order, (size_t)n, bufs[i].buf, kind[0] == 'f', bufs[i + 1].buf);
            else if (kind[0] == 'd')
                tree_depths(parent.buf, order, (size_t)n, bufs[i].buf);
            else
                tree_subtree_sums(parent.buf, order, (size_t)n, bufs[i].buf);
        }
        Py_END_ALLOW_THREADS
        free(order);
    }
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&bufs[i]);
    PyBuffer_Release(&parent);
    if (!order) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"open_depths", open_depths, METH_VARARGS,
     "open_depths(ks, ke, depth, up): per span in nesting order, the earlier spans open at its "
     "start and the nearest earlier span one level up (-1), into depth and up (int64)."},
    {"walk", walk, METH_VARARGS,
     "walk(parent, kind, buffers): per node of the forest in parent (int64, -1: root), one walk "
     "per buffer: 'nearest'/'farthest' marked node ((marks uint8, out int64) pairs), 'depth' "
     "(out int64), 'sum' (int64 summed over each subtree, in place)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ctree", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ctree(void) {
    return PyModule_Create(&module);
}
