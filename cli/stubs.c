#include "cli/cli.h"
#define STUB(n)                                                                                    \
    int n(const struct cli_conf *c, int argc, char **argv)                                         \
    {                                                                                              \
        cli_errorf("not yet");                                                                     \
        return 1;                                                                                  \
    }
STUB(cli_cmd_produce)
STUB(cli_cmd_tail)
STUB(cli_cmd_head)
STUB(cli_cmd_ledger)
