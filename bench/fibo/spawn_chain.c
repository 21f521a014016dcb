/* spawn_chain COUNT PROGRAM [ARG...]: the reference for the exec-block
 * chain. Starts PROGRAM COUNT times in a row with posix_spawn, waiting for
 * each (its stdout to /dev/null), and prints one JSON line with the time
 * the COUNT spawns took. Exits non-zero if a spawn fails or a run does not
 * exit 0. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: spawn_chain COUNT PROGRAM [ARG...]\n");
        return 2;
    }
    long count = strtol(argv[1], NULL, 10);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < count; i++) {
        pid_t pid;
        int rc = posix_spawn(&pid, argv[2], &actions, NULL, &argv[2], environ);
        if (rc != 0) {
            fprintf(stderr, "spawn_chain: posix_spawn %s: error %d\n", argv[2], rc);
            return 1;
        }
        int status;
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "spawn_chain: run %ld of %s failed (status %d)\n", i, argv[2], status);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("{\"peer\": \"spawn\", \"steps\": %ld, \"seconds\": %.6f}\n", count, seconds);
    return 0;
}
