#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include "CLinux.h"

#ifndef RUNLOOPD_COMMIT
#define RUNLOOPD_COMMIT "unknown"
#endif

const char *clinux_build_commit(void) { return RUNLOOPD_COMMIT; }

int clinux_gettid(void) { return (int)syscall(SYS_gettid); }

int clinux_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }

int clinux_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int clinux_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

int clinux_stack_bounds(unsigned long *low, unsigned long *high) {
    pthread_attr_t attr;
    int status = pthread_getattr_np(pthread_self(), &attr);
    if (status != 0) return status;
    void *address = 0;
    size_t size = 0;
    status = pthread_attr_getstack(&attr, &address, &size);
    pthread_attr_destroy(&attr);
    if (status != 0) return status;
    *low = (unsigned long)address;
    *high = (unsigned long)address + size;
    return 0;
}

__attribute__((noinline)) unsigned long clinux_stack_here(void) {
    return (unsigned long)__builtin_frame_address(0);
}
