/* fibo N: prints fibo(N), computed recursively like the WASM worker and the
 * Python peers. The exec-block task and the spawn reference run this. */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long fibo(unsigned n) { return n < 2 ? n : fibo(n - 1) + fibo(n - 2); }

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fibo N\n");
        return 2;
    }
    printf("%llu\n", fibo((unsigned)strtoul(argv[1], NULL, 10)));
    return 0;
}
