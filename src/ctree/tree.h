/* traceview's compiled tree walks: the per-node loops link.py's numpy code does in passes.
 *
 * Pure C (no Python): the CPython module (module.c) and the tests' fallback comparison
 * call it. Every function takes its arrays and their length from the caller, checks
 * every index it follows (a parent outside [-1, n) or a loop of parents is an error,
 * TREE_BAD), never recurses, and allocates at most O(n) scratch (TREE_NOMEM).
 */
#ifndef TRACEVIEW_TREE_H
#define TRACEVIEW_TREE_H

#include <stddef.h>
#include <stdint.h>

enum { TREE_OK = 0, TREE_BAD = 1, TREE_NOMEM = 2 };

/* Spans in nesting order (start keys ``ks`` not decreasing, ends ``ke`` >= starts): per span,
 * how many earlier spans are still open at its start (end strictly after it), and the position
 * of the nearest earlier span one level up (-1: none). TREE_BAD when ks decreases. */
int tree_open_depths(const int64_t *ks, const int64_t *ke, size_t n, int64_t *depth, int64_t *up);

/* An order of the n nodes in which every node's parent (-1: a root) comes before it. */
int tree_order(const int64_t *parent, size_t n, int64_t *order);

/* Per node, among itself and its ancestors: the marked node nearest it (``farthest`` 0) or
 * nearest the root (``farthest`` 1), -1 where none is marked. ``order``: tree_order's. */
void tree_marked(const int64_t *parent, const int64_t *order, size_t n, const uint8_t *marked,
                 int farthest, int64_t *out);

/* Per node, its number of ancestors. */
void tree_depths(const int64_t *parent, const int64_t *order, size_t n, int64_t *depth);

/* ``total`` (per node) summed over each node and all below it, in place (wrapping, as numpy). */
void tree_subtree_sums(const int64_t *parent, const int64_t *order, size_t n, int64_t *total);

#endif
