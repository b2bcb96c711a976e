// Linux calls Swift's Glibc module does not import (eventfd, thread names,
// closefrom for spawned children).
#ifndef CLINUX_H
#define CLINUX_H
#include <malloc.h>
#include <spawn.h>
#include <sys/eventfd.h>

/// A non-blocking, close-on-exec eventfd with counter 0, or -1 (errno set).
static inline int clinux_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/// Sets the calling thread's name (at most 15 bytes + NUL; the caller truncates).
int clinux_set_thread_name(const char *name);

/// The kernel thread id of the calling thread.
int clinux_gettid(void);

/// A pipe whose two ends are close-on-exec from birth (`pipe2`), so a process
/// spawned by another thread at the same moment cannot inherit them.
int clinux_pipe_cloexec(int fds[2]);

/// Adds "close every descriptor from `lowest` up" to `actions` (glibc's
/// `posix_spawn_file_actions_addclosefrom_np`), so a spawned child, and any
/// daemon it leaves behind, holds none of the parent's pipes.
int clinux_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

/// The calling thread's stack: its lowest and highest address (the stack
/// grows down from `high`). 0 on success, else an errno value.
int clinux_stack_bounds(unsigned long *low, unsigned long *high);

/// An address in the caller's frame: how deep its stack is now.
unsigned long clinux_stack_here(void);

/// Gives the heap's free memory back to the system (glibc's `malloc_trim(0)`):
/// the history writer calls it once its queue drains after a flood.
static inline int clinux_malloc_trim(void) { return malloc_trim(0); }

/// The commit this binary was built from (RUNLOOPD_COMMIT at build time, Package.swift), or "unknown".
const char *clinux_build_commit(void);
#endif
