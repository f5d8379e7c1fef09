/*
 * tree.h - internal: an intrusive ordered set (a treap) keyed by three 64-bit
 * integers compared in order. The allocators embed a ts_tnode in their blocks
 * and keep free blocks ordered by (stream, size, address) or by address, the
 * orders their best-fit and neighbour searches need.
 *
 * The caller owns the nodes and sets node->k before inserting; keys must be
 * unique within a tree (the address makes them so). Priorities come from a
 * per-tree generator seeded by the caller, so shapes are deterministic.
 * Expected O(log n) per call; nothing allocates; not thread-safe.
 */
#ifndef TS_ALLOC_TREE_H
#define TS_ALLOC_TREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_tnode {
    struct ts_tnode *l, *r;
    uint64_t k[3];
    uint32_t prio;
} ts_tnode;

typedef struct ts_tree {
    ts_tnode *root;
    size_t n;
    uint32_t rng;
} ts_tree;

void alloc_tree_init(ts_tree *t, uint32_t seed);
void alloc_tree_insert(ts_tree *t, ts_tnode *n);
/* n must be in t. */
void alloc_tree_remove(ts_tree *t, ts_tnode *n);
/* Smallest node with key >= (k0, k1, k2); NULL if none. */
ts_tnode *alloc_tree_lower_bound(const ts_tree *t, uint64_t k0, uint64_t k1, uint64_t k2);
/* Largest node with key <= (k0, k1, k2); NULL if none. */
ts_tnode *alloc_tree_floor(const ts_tree *t, uint64_t k0, uint64_t k1, uint64_t k2);
ts_tnode *alloc_tree_first(const ts_tree *t);
ts_tnode *alloc_tree_last(const ts_tree *t);
/* In-order neighbours of a node in t. */
ts_tnode *alloc_tree_next(const ts_tree *t, const ts_tnode *n);
ts_tnode *alloc_tree_prev(const ts_tree *t, const ts_tnode *n);

#define TS_CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif
