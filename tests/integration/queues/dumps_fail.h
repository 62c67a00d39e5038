/* The marker of dumps_fail.c: a value whose JSON text holds it cannot be encoded by json_dumps
 * in a service started with LD_PRELOAD=DUMPS_FAIL_LIBRARY. */
#ifndef TESTS_DUMPS_FAIL_H
#define TESTS_DUMPS_FAIL_H

#define DUMPS_FAIL_MARKER "rowlock-test-unencodable"

#endif
