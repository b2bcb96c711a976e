/*
 * The run-loop baseline of the HTTP-hop benchmark: the least a libmicrohttpd
 * server can do to answer from a CoreFoundation run loop. The epoll thread
 * suspends each request, appends it to a locked array and signals a plain
 * version-0 CFRunLoopSource (CFRunLoopSourceSignal + CFRunLoopWakeUp); the
 * loop's perform swaps the array out, queues a fixed JSON body and resumes
 * each connection. With HOPS 2 loop A hands the connections the same way to
 * loop B, which answers (the shape of perform + waitUntilDone).
 *
 *   minimal-hop PORT [HOPS] [BODY_BYTES]
 *
 * Daemon flags are runloopd's (epoll thread, suspend/resume, error log), the
 * connection options, body padding and POST handling those of hello.c.
 * Runs until SIGINT or SIGTERM.
 */
/* CF's headers test clang's endian macro; gcc has only __BYTE_ORDER__. The
 * umbrella CoreFoundation.h needs clang (blocks): CFRunLoop.h is enough. */
#if !defined(__LITTLE_ENDIAN__) && !defined(__BIG_ENDIAN__)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define __LITTLE_ENDIAN__ 1
#else
#define __BIG_ENDIAN__ 1
#endif
#endif
#include <CoreFoundation/CFRunLoop.h>
#include <pthread.h>

#include "bare.h"

static struct MHD_Response *canned;

struct hop {
    pthread_mutex_t lock;
    struct MHD_Connection **items, **spare;   /* spare: the perform's own buffer */
    size_t count, capacity, spare_capacity;
    CFRunLoopSourceRef source;
    CFRunLoopRef loop;
    struct hop *next;                         /* NULL: this loop answers */
    pthread_mutex_t started_lock;
    pthread_cond_t started;
};

static void hand_over(struct hop *hop, struct MHD_Connection *connection) {
    pthread_mutex_lock(&hop->lock);
    if (hop->count == hop->capacity) {
        hop->capacity = hop->capacity ? hop->capacity * 2 : 64;
        hop->items = realloc(hop->items, hop->capacity * sizeof *hop->items);
    }
    hop->items[hop->count++] = connection;
    pthread_mutex_unlock(&hop->lock);
    CFRunLoopSourceSignal(hop->source);
    CFRunLoopWakeUp(hop->loop);
}

static void perform(void *info) {
    struct hop *hop = info;
    pthread_mutex_lock(&hop->lock);
    struct MHD_Connection **batch = hop->items;
    size_t count = hop->count, capacity = hop->capacity;
    hop->items = hop->spare;
    hop->capacity = hop->spare_capacity;
    hop->count = 0;
    pthread_mutex_unlock(&hop->lock);
    for (size_t i = 0; i < count; i++) {
        if (hop->next != NULL) {
            hand_over(hop->next, batch[i]);
        } else {   /* a suspended connection may be answered from any thread */
            MHD_queue_response(batch[i], MHD_HTTP_OK, canned);
            MHD_resume_connection(batch[i]);
        }
    }
    hop->spare = batch;
    hop->spare_capacity = capacity;
}

static void *loop_main(void *arg) {
    struct hop *hop = arg;
    CFRunLoopSourceContext context;
    memset(&context, 0, sizeof context);
    context.info = hop;
    context.perform = perform;
    pthread_mutex_lock(&hop->started_lock);
    hop->source = CFRunLoopSourceCreate(kCFAllocatorDefault, 0, &context);
    hop->loop = (CFRunLoopRef)CFRetain(CFRunLoopGetCurrent());
    CFRunLoopAddSource(hop->loop, hop->source, kCFRunLoopDefaultMode);
    pthread_cond_signal(&hop->started);
    pthread_mutex_unlock(&hop->started_lock);
    CFRunLoopRun();
    return NULL;
}

static void start_loop(struct hop *hop, struct hop *next) {
    memset(hop, 0, sizeof *hop);
    hop->next = next;
    pthread_mutex_init(&hop->lock, NULL);
    pthread_mutex_init(&hop->started_lock, NULL);
    pthread_cond_init(&hop->started, NULL);
    pthread_t thread;
    pthread_mutex_lock(&hop->started_lock);
    if (pthread_create(&thread, NULL, loop_main, hop) != 0) { perror("pthread_create"); exit(1); }
    while (hop->loop == NULL) pthread_cond_wait(&hop->started, &hop->started_lock);
    pthread_mutex_unlock(&hop->started_lock);
    pthread_detach(thread);
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
    (void)url; (void)method; (void)version; (void)upload_data;
    static int headers_seen, handed_over;
    if (*req_cls == NULL) {          /* headers only: wait for the body (if any) */
        *req_cls = &headers_seen;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {    /* a body chunk: consume it */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*req_cls == &handed_over)    /* answered by the loop already */
        return MHD_YES;
    *req_cls = &handed_over;
    MHD_suspend_connection(connection);
    hand_over(cls, connection);
    return MHD_YES;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [HOPS] [BODY_BYTES]\n", argv[0]);
        return 2;
    }
    unsigned short port = (unsigned short)atoi(argv[1]);
    int hops = argc > 2 ? atoi(argv[2]) : 1;
    size_t size = argc > 3 ? (size_t)atol(argv[3]) : 16;
    if (hops != 1 && hops != 2) {
        fprintf(stderr, "minimal-hop: HOPS must be 1 or 2\n");
        return 2;
    }
    if (size < 16) size = 16;
    canned = canned_json(size);

    sigset_t stop;
    block_stop_signals(&stop);   /* before MHD's and the loops' threads start */

    static struct hop a, b;
    if (hops == 2) start_loop(&b, NULL);
    start_loop(&a, hops == 2 ? &b : NULL);

    /* runloopd's flags (Sources/MicroHTTP/HTTPServer.swift), IPv4. */
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME
                         | MHD_USE_ERROR_LOG;
    struct MHD_Daemon *daemon = MHD_start_daemon(
        flags, port, NULL, NULL, answer, &a,
        BARE_CONNECTION_OPTIONS,
        MHD_OPTION_END);
    char listening[80];
    snprintf(listening, sizeof listening, "listening %u hops %d body %zu", port, hops, size);
    return serve_until_stopped("minimal-hop", daemon, port, &stop, canned, listening);
}
