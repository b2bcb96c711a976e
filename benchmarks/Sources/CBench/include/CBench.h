#ifndef CBENCH_H
#define CBENCH_H

/// Restricts the calling thread (and the threads it starts afterwards) to
/// CPU 0; returns an opaque copy of the previous mask to restore, or NULL.
void *cbench_pin_to_cpu0(void);

/// Restores the mask saved by cbench_pin_to_cpu0 and frees it.
void cbench_restore_affinity(void *saved);

#endif
