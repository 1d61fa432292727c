/* traceview's compiled tree walks: see tree.h. */
#include "tree.h"

#include <stdlib.h>

/* ---- a min-heap of span ends ------------------------------------------ */

static void heap_push(int64_t *h, size_t *n, int64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static void heap_pop(int64_t *h, size_t *n) {
    int64_t v = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
}

int tree_open_depths(const int64_t *ks, const int64_t *ke, size_t n, int64_t *depth, int64_t *up) {
    /* the ends of the spans still open, and the last span seen at each depth: both at most n */
    int64_t *heap = malloc((n ? n : 1) * sizeof *heap);
    int64_t *last = malloc((n ? n : 1) * sizeof *last);
    size_t open = 0;
    if (!heap || !last) {
        free(heap), free(last);
        return TREE_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (i && ks[i] < ks[i - 1]) {
            free(heap), free(last);
            return TREE_BAD;
        }
        /* starts never decrease, so an end at or before this start is before every later one */
        while (open && heap[0] <= ks[i]) heap_pop(heap, &open);
        size_t d = open;  /* <= i: every open span is an earlier one */
        depth[i] = (int64_t)d;
        up[i] = d ? last[d - 1] : -1;
        last[d] = (int64_t)i;
        heap_push(heap, &open, ke[i]);
    }
    free(heap), free(last);
    return TREE_OK;
}

/* ---- parents first ---------------------------------------------------- */

enum { UNSEEN = 0, ON_PATH = 1, PLACED = 2 };

int tree_order(const int64_t *parent, size_t n, int64_t *order) {
    uint8_t *state = calloc(n ? n : 1, 1);
    int64_t *path = malloc((n ? n : 1) * sizeof *path);  /* a node and its unplaced ancestors */
    size_t placed = 0;
    if (!state || !path) {
        free(state), free(path);
        return TREE_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        int64_t cur = (int64_t)i;
        while (cur >= 0 && state[cur] == UNSEEN) {
            state[cur] = ON_PATH;
            path[len++] = cur;
            cur = parent[cur];
            if (cur < -1 || cur >= (int64_t)n) goto bad;
        }
        if (cur >= 0 && state[cur] == ON_PATH) goto bad;  /* a loop of parents */
        while (len) {  /* the path's root end first */
            int64_t v = path[--len];
            state[v] = PLACED;
            order[placed++] = v;
        }
    }
    free(state), free(path);
    return TREE_OK;
bad:
    free(state), free(path);
    return TREE_BAD;
}

/* ---- walks in that order ---------------------------------------------- */

void tree_marked(const int64_t *parent, const int64_t *order, size_t n, const uint8_t *marked,
                 int farthest, int64_t *out) {
    for (size_t k = 0; k < n; k++) {
        int64_t v = order[k], p = parent[v];
        int64_t above = p >= 0 ? out[p] : -1;
        int64_t self = marked[v] ? v : -1;
        out[v] = farthest ? (above >= 0 ? above : self) : (self >= 0 ? self : above);
    }
}

void tree_depths(const int64_t *parent, const int64_t *order, size_t n, int64_t *depth) {
    for (size_t k = 0; k < n; k++) {
        int64_t v = order[k], p = parent[v];
        depth[v] = p >= 0 ? depth[p] + 1 : 0;
    }
}

void tree_subtree_sums(const int64_t *parent, const int64_t *order, size_t n, int64_t *total) {
    for (size_t k = n; k-- > 0;) {  /* children first */
        int64_t v = order[k], p = parent[v];
        if (p >= 0) total[p] = (int64_t)((uint64_t)total[p] + (uint64_t)total[v]);
    }
}
