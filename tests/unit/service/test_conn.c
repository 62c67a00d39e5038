/* Unit tests of service/conn.c on socket pairs: the count against the limit, and the deadline:
 * a connection whose request has not arrived whole in time is shut down (its peer reads EOF),
 * one whose request arrived, or that is within its deadline, is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/socket.h>
#include <unistd.h>

#include "service/conn.h"

/* 1 when this end reads EOF (its reading side was shut down), 0 when nothing is there. */
static int reads_eof(int peer)
{
    char c;
    return recv(peer, &c, 1, MSG_DONTWAIT) == 0;
}

static void test_limit(void **state)
{
    struct svc_conns *c = svc_conns_new(2, 10, 10);
    assert_non_null(c);
    assert_true(svc_conns_admit(c, 0));
    assert_true(svc_conns_admit(c, 1));
    assert_false(svc_conns_admit(c, 2)); /* two waiting at the gate fill it too */
    struct svc_conn *a = svc_conns_opened(c, -1, 0);
    assert_false(svc_conns_admit(c, 1));
    struct svc_conn *b = svc_conns_opened(c, -1, 0);
    assert_false(svc_conns_admit(c, 0));
    svc_conns_closed(c, a);
    assert_true(svc_conns_admit(c, 0));
    svc_conns_closed(c, b);
    svc_conns_free(c);
}

static void test_deadlines(void **state)
{
    /* request: 3 s from its first line; first line: 5 s from the opening or the last response */
    struct svc_conns *c = svc_conns_new(10, 3, 5);
    int slow_line[2], slow_body[2], whole[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, slow_line), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, slow_body), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, whole), 0);
    struct svc_conn *l = svc_conns_opened(c, slow_line[0], 100);
    struct svc_conn *b = svc_conns_opened(c, slow_body[0], 100);
    struct svc_conn *w = svc_conns_opened(c, whole[0], 100);
    svc_conns_mark(c, b, 1, 1, 101); /* first line at 101, body still coming */
    svc_conns_mark(c, w, 1, 1, 101);
    svc_conns_mark(c, w, 1, 0, 102); /* arrived whole at 102: a handler may take long */
    assert_int_equal(svc_conns_cut_late(c, 104), 0);
    assert_int_equal(svc_conns_cut_late(c, 104.5), 1); /* 3.5 s after its first line */
    assert_true(reads_eof(slow_body[0]));
    assert_false(reads_eof(slow_line[0]));
    assert_int_equal(svc_conns_cut_late(c, 105.5), 1); /* 5.5 s after the opening */
    assert_true(reads_eof(slow_line[0]));
    assert_int_equal(svc_conns_cut_late(c, 1000), 0); /* each is cut once; w never */
    assert_false(reads_eof(whole[0]));
    /* the next request on w: its first line within 5 s of the response */
    svc_conns_mark(c, w, 0, 1, 1000);
    assert_int_equal(svc_conns_cut_late(c, 1004), 0);
    assert_int_equal(svc_conns_cut_late(c, 1006), 1);
    assert_true(reads_eof(whole[0]));
    svc_conns_closed(c, l);
    svc_conns_closed(c, b);
    svc_conns_closed(c, w);
    for (int i = 0; i < 2; i++) {
        close(slow_line[i]);
        close(slow_body[i]);
        close(whole[i]);
    }
    svc_conns_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_deadlines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
