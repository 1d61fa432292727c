/* libFuzzer harness for the compiled tree walks (src/ctree/tree.c), under ASan and UBSan.
 *
 * The first byte picks the function, the rest is read as int64 values (up to 512):
 *  - 0..127: a parent array (values folded into [-2, n], so loops, roots and bad indices all
 *    come up). tree_order must refuse a bad one, or give a permutation with parents first;
 *    the walks then run on it and depth/nearest/farthest are checked against a plain walk up.
 *  - 128..255: spans for tree_open_depths (starts from the values' running sum, so mostly in
 *    order; an odd first byte lets them decrease, which must be refused), checked against a
 *    count of the open earlier spans.
 * A mismatch aborts, which libFuzzer reports as a crash.
 */
#include <stdlib.h>
#include <string.h>

#include "tree.h"

#define MAX_N 512

static void check(int ok) {
    if (!ok) abort();
}

static void forest(const int64_t *v, size_t n) {
    int64_t parent[MAX_N], order[MAX_N], depth[MAX_N], near[MAX_N], far[MAX_N], sums[MAX_N];
    uint8_t marked[MAX_N], placed[MAX_N];
    for (size_t i = 0; i < n; i++) {
        uint64_t u = (uint64_t)v[i];
        parent[i] = (int64_t)(u % (n + 3)) - 2;  /* -2 .. n: out of range at both ends */
        marked[i] = (uint8_t)(u >> 60) & 1;
    }
    if (tree_order(parent, n, order) != TREE_OK) return;
    memset(placed, 0, sizeof placed);
    for (size_t k = 0; k < n; k++) {
        int64_t x = order[k];
        check(x >= 0 && (size_t)x < n && !placed[x]);
        check(parent[x] >= -1 && parent[x] < (int64_t)n);
        check(parent[x] < 0 || placed[parent[x]]);
        placed[x] = 1;
    }
    tree_depths(parent, order, n, depth);
    tree_marked(parent, order, n, marked, 0, near);
    tree_marked(parent, order, n, marked, 1, far);
    for (size_t i = 0; i < n; i++) sums[i] = 1;
    tree_subtree_sums(parent, order, n, sums);
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t d = 0, first = -1, last = -1;
        for (int64_t x = (int64_t)i; x >= 0; x = parent[x], d++) {
            if (marked[x] && first < 0) first = x;
            if (marked[x]) last = x;
        }
        check(depth[i] == d - 1 && near[i] == first && far[i] == last);
        if (parent[i] < 0) total += sums[i];
    }
    check(total == (int64_t)n);  /* every node counted once, under its root */
}

static void spans(const int64_t *v, size_t n, int may_decrease) {
    int64_t ks[MAX_N], ke[MAX_N], depth[MAX_N], up[MAX_N];
    int64_t at = 0;
    int sorted = 1;
    for (size_t i = 0; i < n; i++) {
        int64_t step = (int64_t)((uint64_t)v[i] % 8) - (may_decrease ? 1 : 0);
        at += step;
        ks[i] = at;
        ke[i] = at + (int64_t)(((uint64_t)v[i] >> 8) % 16);
        if (i && ks[i] < ks[i - 1]) sorted = 0;
    }
    int rc = tree_open_depths(ks, ke, n, depth, up);
    check(rc == (sorted ? TREE_OK : TREE_BAD));
    if (rc != TREE_OK) return;
    for (size_t i = 0; i < n; i++) {
        int64_t d = 0, last = -1;
        for (size_t j = 0; j < i; j++) d += ke[j] > ks[i];
        for (size_t j = 0; j < i; j++)
            if (depth[j] == d - 1) last = (int64_t)j;
        check(depth[i] == d && up[i] == (d ? last : -1));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int64_t v[MAX_N];
    size_t n = (size - 1) / 8;
    if (n > MAX_N) n = MAX_N;
    memcpy(v, data + 1, n * 8);
    if (data[0] < 128) forest(v, n);
    else spans(v, n, data[0] & 1);
    return 0;
}
