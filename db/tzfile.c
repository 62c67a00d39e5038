/* TZif files (RFC 8536) read into immutable zones: the name rules, the file read and checked
 * (version 1's 32-bit block, or version 2+'s 64-bit block and footer), and the span of an
 * instant among the file's transitions, with the footer's rule (db/tzrule.c) past the last;
 * and the zones a process has loaded, kept by name (db_tz_get). */
#include "db/tzfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/civil.h"
#include "db/tzrule.h"

#define HEADER     44 /* "TZif", version, 15 unused bytes, six 32-bit counts */
#define TYPES_MAX  256
#define UTOFF_MIN  (-89999) /* RFC 8536: offsets stay within -25:59:59 to 25:59:59 */
#define UTOFF_MAX  93599
#define INSTANT_LO (-(INT64_C(1) << 60)) /* transitions beyond this are refused */
#define INSTANT_HI (INT64_C(1) << 60)
#define SPAN_MIN   INT64_C(-62135596800) /* 0001-01-01T00:00:00Z: db_tz_span's range */
#define SPAN_MAX   INT64_C(253402300799) /* 9999-12-31T23:59:59Z */

struct db_tz {
    size_t n;       /* transitions */
    int64_t *times; /* n instants, ascending */
    uint8_t *types; /* n indices into utoff/isdst: the type from each transition on */
    size_t ntypes;  /* 1 to TYPES_MAX; type 0 holds before the first transition */
    int32_t utoff[TYPES_MAX];
    uint8_t isdst[TYPES_MAX];
    struct db_tz_rule rule; /* the footer, for instants past the last transition */
};

struct counts {
    uint32_t isut, isstd, leap, time, type, chars;
};

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

int db_tz_name_check(const char *name, char *err, size_t errsize)
{
    size_t len = strlen(name);
    if (len == 0 || len > DB_TZ_NAME_MAX) {
        snprintf(err, errsize, "a time zone name has 1 to %d bytes", DB_TZ_NAME_MAX);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        int letter = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
        if (!letter && !(ch >= '0' && ch <= '9') && !strchr("_+-/", ch)) {
            snprintf(err, errsize,
                     "a time zone name holds only letters, digits, '_', '+', '-' and '/' "
                     "(byte %zu is 0x%02x)",
                     i + 1, ch);
            return -1;
        }
        if ((i == 0 || name[i - 1] == '/') && !letter) {
            snprintf(err, errsize,
                     "each '/'-separated part of a time zone name starts with a letter (as "
                     "in Europe/Berlin): byte %zu does not",
                     i + 1);
            return -1;
        }
    }
    if (name[len - 1] == '/' || strcmp(name, "localtime") == 0) {
        snprintf(err, errsize, "\"%s\" is not a time zone name (as in Europe/Berlin or UTC)", name);
        return -1;
    }
    return 0;
}

/* The counts of the header at p (len bytes left); -1 when there is no TZif header. */
static int read_counts(const unsigned char *p, size_t len, struct counts *c)
{
    if (len < HEADER || memcmp(p, "TZif", 4) != 0)
        return -1;
    c->isut = be32(p + 20), c->isstd = be32(p + 24), c->leap = be32(p + 28);
    c->time = be32(p + 32), c->type = be32(p + 36), c->chars = be32(p + 40);
    return 0;
}

/* Checks the counts of the block this module reads (RFC 8536 section 3.1). */
static int check_counts(const struct counts *c, char *err, size_t errsize)
{
    if (c->type == 0 || c->type > TYPES_MAX || c->chars == 0 ||
        (c->isut != 0 && c->isut != c->type) || (c->isstd != 0 && c->isstd != c->type)) {
        snprintf(err, errsize, "not a TZif file (inconsistent counts)");
        return -1;
    }
    if (c->leap != 0) {
        snprintf(err, errsize, "a TZif file with leap seconds (right/...) is not supported");
        return -1;
    }
    return 0;
}

/* Bytes of the data block that follows a header of counts c, with w-byte instants. */
static uint64_t block_size(const struct counts *c, unsigned w)
{
    return (uint64_t)c->time * (w + 1) + (uint64_t)c->type * 6 + c->chars +
           (uint64_t)c->leap * (w + 4) + c->isstd + c->isut;
}

/* The transitions and types of the block at p (counts c, w-byte instants) into z. */
static int read_block(const unsigned char *p, const struct counts *c, unsigned w, struct db_tz *z,
                      char *err, size_t errsize)
{
    const unsigned char *idx = p + (size_t)c->time * w, *tt = idx + c->time;
    z->n = c->time;
    z->ntypes = c->type;
    z->times = malloc(z->n ? z->n * sizeof(*z->times) : 1);
    z->types = malloc(z->n ? z->n : 1);
    if (z->times == NULL || z->types == NULL) {
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < z->n; i++) {
        z->times[i] = w == 8 ? be64(p + 8 * i) : (int64_t)(int32_t)be32(p + 4 * i);
        z->types[i] = idx[i];
        if (idx[i] >= c->type || z->times[i] < INSTANT_LO || z->times[i] > INSTANT_HI ||
            (i > 0 && z->times[i] <= z->times[i - 1])) {
            snprintf(err, errsize, "not a TZif file (bad transition %zu)", i);
            return -1;
        }
    }
    for (size_t i = 0; i < z->ntypes; i++, tt += 6) {
        z->utoff[i] = (int32_t)be32(tt);
        z->isdst[i] = tt[4];
        if (z->utoff[i] < UTOFF_MIN || z->utoff[i] > UTOFF_MAX || tt[4] > 1 || tt[5] >= c->chars) {
            snprintf(err, errsize, "not a TZif file (bad local time type %zu)", i);
            return -1;
        }
    }
    return 0;
}

/* The footer "\nTZ\n" at p (len bytes left, all of the file's rest) into z->rule. */
static int read_footer(const unsigned char *p, size_t len, struct db_tz *z, char *err,
                       size_t errsize)
{
    const unsigned char *nl = len > 0 ? memchr(p + 1, '\n', len - 1) : NULL;
    if (len < 2 || p[0] != '\n' || nl == NULL || nl != p + len - 1) {
        snprintf(err, errsize, "not a TZif file (no footer after its data)");
        return -1;
    }
    return db_tz_rule_parse((const char *)p + 1, len - 2, &z->rule, err, errsize);
}

struct db_tz *db_tz_parse(const unsigned char *data, size_t len, char *err, size_t errsize)
{
    struct db_tz *z = calloc(1, sizeof(*z)), *result = NULL;
    struct counts c;
    uint64_t off = HEADER;
    if (z == NULL) {
        snprintf(err, errsize, "out of memory");
        return NULL;
    }
    if (read_counts(data, len, &c) < 0) {
        snprintf(err, errsize, "not a TZif file (no TZif header)");
        goto done;
    }
    if (data[4] != '\0' && (data[4] < '2' || data[4] > '9')) {
        snprintf(err, errsize, "not a TZif file (unknown version byte 0x%02x)", data[4]);
        goto done;
    }
    if (data[4] != '\0') { /* version 2 and later: skip the 32-bit block to the 64-bit one */
        off += block_size(&c, 4);
        if (off > len || read_counts(data + off, len - off, &c) < 0)
            goto short_file;
        off += HEADER;
    }
    unsigned w = data[4] != '\0' ? 8 : 4;
    if (check_counts(&c, err, errsize) < 0)
        goto done;
    if (block_size(&c, w) > len - off)
        goto short_file;
    if (read_block(data + off, &c, w, z, err, errsize) < 0)
        goto done;
    off += block_size(&c, w);
    if (w == 8 && read_footer(data + off, len - off, z, err, errsize) < 0)
        goto done;
    result = z;
    z = NULL;
    goto done;
short_file:
    snprintf(err, errsize, "not a TZif file (truncated)");
done:
    db_tz_free(z);
    return result;
}

void db_tz_free(struct db_tz *z)
{
    if (z == NULL)
        return;
    free(z->times);
    free(z->types);
    free(z);
}

/* Reads the regular file at fd (at most DB_TZ_FILE_MAX bytes) into a malloc'd buffer. */
static unsigned char *read_file(int fd, size_t *len, char *err, size_t errsize)
{
    struct stat st;
    unsigned char *buf = NULL;
    size_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errsize, "a directory of zones, not a zone");
        return NULL;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > DB_TZ_FILE_MAX) {
        snprintf(err, errsize, "not a TZif file (not a regular file of at most %d bytes)",
                 DB_TZ_FILE_MAX);
        return NULL;
    }
    if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
        snprintf(err, errsize, "out of memory");
        return NULL;
    }
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errsize, "cannot read the file: %s", r < 0 ? strerror(errno) : "short");
            free(buf);
            return NULL;
        }
        got += (size_t)r;
    }
    *len = got;
    return buf;
}

struct db_tz *db_tz_load(const char *name, char *err, size_t errsize)
{
    char path[sizeof(DB_TZ_DIR) + DB_TZ_NAME_MAX + 1], why[DB_TZ_ERROR_SIZE];
    unsigned char *buf = NULL;
    struct db_tz *z = NULL;
    size_t len = 0;
    int fd = -1;
    if (db_tz_name_check(name, err, errsize) < 0)
        return NULL;
    snprintf(path, sizeof(path), "%s/%s", DB_TZ_DIR, name);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            snprintf(err, errsize, "unknown time zone \"%s\" (no such zone in %s)", name,
                     DB_TZ_DIR);
        else
            snprintf(err, errsize, "time zone \"%s\": cannot open %s: %s", name, path,
                     strerror(errno));
        return NULL;
    }
    if ((buf = read_file(fd, &len, why, sizeof(why))) != NULL)
        z = db_tz_parse(buf, len, why, sizeof(why));
    if (z == NULL)
        snprintf(err, errsize, "time zone \"%s\": %s", name, why);
    free(buf);
    close(fd);
    return z;
}

/* The span past the last transition (or of a file without any): the footer's rule, or the
 * last type when the footer is empty. Without transitions the rule holds at every instant. */
static void span_after(const struct db_tz *z, int64_t t, struct db_tz_span *out)
{
    size_t n = z->n, last = n ? z->types[n - 1] : 0;
    out->start = n ? z->times[n - 1] : INT64_MIN;
    out->end = INT64_MAX;
    out->utoff = z->utoff[last];
    out->isdst = z->isdst[last];
    if (z->rule.kind == DB_TZ_RULE_FIXED) {
        out->utoff = z->rule.std_utoff;
        out->isdst = 0;
    } else if (z->rule.kind == DB_TZ_RULE_DST) {
        db_tz_rule_span(&z->rule, t, out);
        if (n == 0 || out->start > z->times[n - 1])
            return;
        out->start = z->times[n - 1]; /* the rule's change before t is the file's last, or
                                         earlier: the file says what came before it */
    }
    out->prev_utoff = n >= 2 ? z->utoff[z->types[n - 2]] : n == 1 ? z->utoff[0] : out->utoff;
}

void db_tz_span(const struct db_tz *z, int64_t t, struct db_tz_span *out)
{
    size_t lo = 0, hi = z->n;
    t = t < SPAN_MIN ? SPAN_MIN : t > SPAN_MAX ? SPAN_MAX : t;
    if (z->n == 0 || t >= z->times[z->n - 1]) {
        span_after(z, t, out);
        return;
    }
    if (t < z->times[0]) {
        *out = (struct db_tz_span){INT64_MIN, z->times[0], z->utoff[0], z->utoff[0], z->isdst[0]};
        return;
    }
    while (hi - lo > 1) { /* times[lo] <= t < times[hi] */
        size_t mid = lo + (hi - lo) / 2;
        if (z->times[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    out->start = z->times[lo];
    out->end = z->times[hi];
    out->utoff = z->utoff[z->types[lo]];
    out->isdst = z->isdst[z->types[lo]];
    out->prev_utoff = z->utoff[lo > 0 ? z->types[lo - 1] : 0];
}

int32_t db_tz_offset(const struct db_tz *z, int64_t t, int *isdst)
{
    struct db_tz_span s;
    db_tz_span(z, t, &s);
    if (isdst != NULL)
        *isdst = s.isdst;
    return s.utoff;
}

/* ---- zones loaded once per process (db_tz_get) ---- */

/* The zones this process has loaded, never freed (a few hundred exist): a schedule's zone is
 * read on every pass, and a file read per pass would cost more than the pass. */
#define ZONES_MAX 1024
static struct {
    pthread_mutex_t lock;
    size_t n;
    char *names[ZONES_MAX];
    struct db_tz *zones[ZONES_MAX];
} zones = {.lock = PTHREAD_MUTEX_INITIALIZER};

const struct db_tz *db_tz_get(const char *name, char *err, size_t errsize)
{
    if (db_tz_name_check(name, err, errsize) != 0)
        return NULL;
    pthread_mutex_lock(&zones.lock);
    struct db_tz *z = NULL;
    for (size_t i = 0; i < zones.n && z == NULL; i++)
        if (strcmp(zones.names[i], name) == 0)
            z = zones.zones[i];
    if (z == NULL && zones.n == ZONES_MAX)
        snprintf(err, errsize, "more than %d time zones in use", ZONES_MAX);
    else if (z == NULL && (z = db_tz_load(name, err, errsize)) != NULL) {
        char *copy = strdup(name);
        if (copy == NULL) {
            db_tz_free(z);
            z = NULL;
            snprintf(err, errsize, "out of memory");
        } else {
            zones.names[zones.n] = copy;
            zones.zones[zones.n++] = z;
        }
    }
    pthread_mutex_unlock(&zones.lock);
    return z;
}
