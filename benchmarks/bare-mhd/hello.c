/*
 * The baseline of the HTTP-hop benchmark: a bare libmicrohttpd server that
 * answers every request itself, inside the access handler, with a fixed JSON
 * body. Same daemon flags as runloopd (internal polling thread + epoll, or a
 * thread pool), same connection options; no suspend/resume, no run loop.
 *
 *   hello PORT [THREADS] [BODY_BYTES]
 *
 * THREADS 1 = one epoll thread (runloopd --http-threads 1), N > 1 = a pool of N.
 * BODY_BYTES pads the body to the size of the runloopd answer it stands for.
 * A POST body is read and dropped; the answer comes once it is complete.
 * Runs until SIGINT or SIGTERM.
 */
#include "bare.h"

static struct MHD_Response *canned;

static enum MHD_Result answer(void *cls, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    static int first_call_marker;
    if (*req_cls == NULL) {          /* headers only: wait for the body (if any) */
        *req_cls = &first_call_marker;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {    /* a body chunk: consume it */
        *upload_data_size = 0;
        return MHD_YES;
    }
    return MHD_queue_response(connection, MHD_HTTP_OK, canned);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [THREADS] [BODY_BYTES]\n", argv[0]);
        return 2;
    }
    unsigned short port = (unsigned short)atoi(argv[1]);
    unsigned int threads = argc > 2 ? (unsigned int)atoi(argv[2]) : 1;
    size_t size = argc > 3 ? (size_t)atol(argv[3]) : 16;
    if (size < 16) size = 16;
    canned = canned_json(size);

    sigset_t stop;
    block_stop_signals(&stop);   /* before MHD's threads start */

    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    struct MHD_Daemon *daemon = MHD_start_daemon(
        flags, port, NULL, NULL, answer, NULL,
        BARE_CONNECTION_OPTIONS,
        MHD_OPTION_THREAD_POOL_SIZE, threads > 1 ? threads : 0u,
        MHD_OPTION_END);
    char listening[80];
    snprintf(listening, sizeof listening, "listening %u threads %u body %zu", port, threads, size);
    return serve_until_stopped("hello", daemon, port, &stop, canned, listening);
}
