/* print_usage.c — prints the --help text without starting MPI, for the man page built from it
 * (man/usage2man.awk). Linked with app/options.o alone, so the text has one source. */
#include <stdio.h>

#include "../app/options.h"

int main(void)
{
    return fputs(hq_options_usage(), stdout) < 0;
}
