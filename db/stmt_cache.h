/* The prepared statements of one connection (db/query.c prepares, db/pool.c forgets them when the
 * connection closes): at most a capacity of them, found by name through a hash table, the least
 * recently used one evicted (the caller DEALLOCATEs it) to make room. A statement used by the
 * statement batch in progress (the same stamp) is never the one evicted. */
#ifndef DB_STMT_CACHE_H
#define DB_STMT_CACHE_H

#include <stddef.h>

/* Fewest statements a cache holds: more than the statements of any one pipeline. */
#define DB_STMT_CACHE_MIN 16

struct db_stmt_cache;

/* A cache of capacity statements (at least DB_STMT_CACHE_MIN); NULL when out of memory. */
struct db_stmt_cache *db_stmt_cache_new(int capacity);
void db_stmt_cache_free(struct db_stmt_cache *c);
/* Forgets every statement (the server's session that held them is gone). */
void db_stmt_cache_clear(struct db_stmt_cache *c);
/* 1 when name is prepared (it becomes the most recently used, under stamp), else 0. */
int db_stmt_cache_hit(struct db_stmt_cache *c, const char *name, unsigned stamp);
/* When the cache is full, removes its least recently used statement not used under stamp and
 * copies its name into out (for DEALLOCATE): 1; 0 when there is room (or nothing may go). */
int db_stmt_cache_evict(struct db_stmt_cache *c, unsigned stamp, char *out, size_t size);
/* Records name as prepared under stamp: 0, or -1 when out of memory or without room. */
int db_stmt_cache_add(struct db_stmt_cache *c, const char *name, unsigned stamp);
/* Statements held now. */
int db_stmt_cache_count(const struct db_stmt_cache *c);

#endif
