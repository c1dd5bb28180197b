/* dlist: an intrusive, circular, doubly linked list (the idea of libuv's
 * QUEUE and the Linux kernel's list_head): the links live inside the
 * elements, so queuing allocates nothing and removal from the middle is
 * O(1). A list is a sentinel dlist initialized with dlist_init; elements
 * embed a dlist and are recovered with DLIST_ENTRY. Not thread-safe: the
 * owner of the list serializes access. */
#ifndef MEMORYD_CORE_DLIST_H
#define MEMORYD_CORE_DLIST_H

#include <stddef.h>

typedef struct dlist {
    struct dlist *prev, *next;
} dlist;

/* The element of type holding link at member. */
#define DLIST_ENTRY(link, type, member) ((type *)((char *)(link)-offsetof(type, member)))

/* An empty list (the sentinel points at itself). */
static inline void dlist_init(dlist *head) { head->prev = head->next = head; }

static inline int dlist_empty(const dlist *head) { return head->next == head; }

/* The first element's link, or NULL when empty. */
static inline dlist *dlist_first(const dlist *head) {
    return dlist_empty(head) ? NULL : head->next;
}

/* Appends link, which must not be on a list. */
static inline void dlist_push_back(dlist *head, dlist *link) {
    link->prev = head->prev;
    link->next = head;
    head->prev->next = link;
    head->prev = link;
}

/* Puts link first; it must not be on a list. */
static inline void dlist_push_front(dlist *head, dlist *link) { dlist_push_back(head->next, link); }

/* Takes link off its list (it then links to itself: removing it again is
 * harmless). */
static inline void dlist_remove(dlist *link) {
    link->prev->next = link->next;
    link->next->prev = link->prev;
    dlist_init(link);
}

#endif
