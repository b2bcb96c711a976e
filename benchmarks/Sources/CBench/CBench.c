#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include "CBench.h"

void *cbench_pin_to_cpu0(void) {
    cpu_set_t *previous = malloc(sizeof(cpu_set_t));
    if (previous == NULL) return NULL;
    if (sched_getaffinity(0, sizeof(cpu_set_t), previous) != 0) {
        free(previous);
        return NULL;
    }
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(0, &only);
    if (sched_setaffinity(0, sizeof(cpu_set_t), &only) != 0) {
        free(previous);
        return NULL;
    }
    return previous;
}

void cbench_restore_affinity(void *saved) {
    if (saved == NULL) return;
    sched_setaffinity(0, sizeof(cpu_set_t), (cpu_set_t *)saved);
    free(saved);
}
