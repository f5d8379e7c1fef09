/*
 * tree.c - the treap of tree.h: split and merge, no parent pointers, no
 * rotations. Insert splits the tree at the new key and merges the three
 * parts; remove replaces the node by the merge of its children. A treap was
 * chosen over a red-black tree for its size: the allocators' speed depends on
 * the expected depth, which both keep logarithmic.
 */
#include "alloc/tree.h"

static int key_cmp(const uint64_t *a, uint64_t b0, uint64_t b1, uint64_t b2)
{
    if (a[0] != b0)
        return a[0] < b0 ? -1 : 1;
    if (a[1] != b1)
        return a[1] < b1 ? -1 : 1;
    if (a[2] != b2)
        return a[2] < b2 ? -1 : 1;
    return 0;
}

void alloc_tree_init(ts_tree *t, uint32_t seed)
{
    t->root = NULL;
    t->n = 0;
    t->rng = seed ? seed : 0x9e3779b9u;
}

static uint32_t next_prio(ts_tree *t)
{
    uint32_t x = t->rng; /* xorshift32 */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    t->rng = x;
    return x;
}

/* Splits root into nodes with key < k (*lo) and >= k (*hi). */
static void split(ts_tnode *root, const uint64_t *k, ts_tnode **lo, ts_tnode **hi)
{
    ts_tnode **pl = lo, **ph = hi;
    while (root) {
        if (key_cmp(root->k, k[0], k[1], k[2]) < 0) {
            *pl = root;
            pl = &root->r;
            root = root->r;
        } else {
            *ph = root;
            ph = &root->l;
            root = root->l;
        }
    }
    *pl = NULL;
    *ph = NULL;
}

/* Merges a and b where every key of a is below every key of b. */
static ts_tnode *merge(ts_tnode *a, ts_tnode *b)
{
    ts_tnode *root = NULL, **link = &root;
    while (a && b) {
        if (a->prio >= b->prio) {
            *link = a;
            link = &a->r;
            a = a->r;
        } else {
            *link = b;
            link = &b->l;
            b = b->l;
        }
    }
    *link = a ? a : b;
    return root;
}

void alloc_tree_insert(ts_tree *t, ts_tnode *n)
{
    n->prio = next_prio(t);
    n->l = n->r = NULL;
    /* descend while the path's priorities beat n's, then split there */
    ts_tnode **link = &t->root;
    while (*link && (*link)->prio > n->prio)
        link = key_cmp((*link)->k, n->k[0], n->k[1], n->k[2]) < 0 ? &(*link)->r : &(*link)->l;
    split(*link, n->k, &n->l, &n->r);
    *link = n;
    t->n++;
}

void alloc_tree_remove(ts_tree *t, ts_tnode *n)
{
    ts_tnode **link = &t->root;
    while (*link && *link != n)
        link = key_cmp((*link)->k, n->k[0], n->k[1], n->k[2]) < 0 ? &(*link)->r : &(*link)->l;
    if (!*link)
        return; /* not in the tree: a caller bug, kept harmless */
    *link = merge(n->l, n->r);
    n->l = n->r = NULL;
    t->n--;
}

ts_tnode *alloc_tree_lower_bound(const ts_tree *t, uint64_t k0, uint64_t k1, uint64_t k2)
{
    ts_tnode *cur = t->root, *best = NULL;
    while (cur) {
        if (key_cmp(cur->k, k0, k1, k2) >= 0) {
            best = cur;
            cur = cur->l;
        } else {
            cur = cur->r;
        }
    }
    return best;
}

ts_tnode *alloc_tree_floor(const ts_tree *t, uint64_t k0, uint64_t k1, uint64_t k2)
{
    ts_tnode *cur = t->root, *best = NULL;
    while (cur) {
        if (key_cmp(cur->k, k0, k1, k2) <= 0) {
            best = cur;
            cur = cur->r;
        } else {
            cur = cur->l;
        }
    }
    return best;
}

ts_tnode *alloc_tree_first(const ts_tree *t)
{
    ts_tnode *cur = t->root;
    while (cur && cur->l)
        cur = cur->l;
    return cur;
}

ts_tnode *alloc_tree_last(const ts_tree *t)
{
    ts_tnode *cur = t->root;
    while (cur && cur->r)
        cur = cur->r;
    return cur;
}

ts_tnode *alloc_tree_next(const ts_tree *t, const ts_tnode *n)
{
    if (n->r) {
        ts_tnode *cur = n->r;
        while (cur->l)
            cur = cur->l;
        return cur;
    }
    ts_tnode *cur = t->root, *best = NULL;
    while (cur) {
        if (key_cmp(cur->k, n->k[0], n->k[1], n->k[2]) > 0) {
            best = cur;
            cur = cur->l;
        } else {
            cur = cur->r;
        }
    }
    return best;
}

ts_tnode *alloc_tree_prev(const ts_tree *t, const ts_tnode *n)
{
    if (n->l) {
        ts_tnode *cur = n->l;
        while (cur->r)
            cur = cur->r;
        return cur;
    }
    ts_tnode *cur = t->root, *best = NULL;
    while (cur) {
        if (key_cmp(cur->k, n->k[0], n->k[1], n->k[2]) < 0) {
            best = cur;
            cur = cur->r;
        } else {
            cur = cur->l;
        }
    }
    return best;
}
