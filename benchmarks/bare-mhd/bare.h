/*
 * What the two bare baselines (hello.c, minimal-hop.c) share, so that they
 * answer alike and differ only in where they answer: the canned JSON body,
 * runloopd's connection options, the signal mask and the serving until a stop.
 * Header-only; each program includes it once.
 */
#ifndef BARE_MHD_BARE_H
#define BARE_MHD_BARE_H

#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* runloopd's connection options (Sources/MicroHTTP/HTTPServer.swift). */
#define BARE_CONNECTION_OPTIONS                                   \
    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)1020,              \
    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)64,         \
    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30,              \
    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024)

/* The fixed answer: `{"hello":"world"` padded with spaces to `size` bytes
 * (at least 16: the caller's to ensure) and closed, as application/json. */
static struct MHD_Response *canned_json(size_t size) {
    char *body = malloc(size);
    memset(body, ' ', size);
    memcpy(body, "{\"hello\":\"world\"", 16);
    body[size - 1] = '}';
    struct MHD_Response *response = MHD_create_response_from_buffer(size, body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(response, "Content-Type", "application/json");
    free(body);
    return response;
}

/* Blocks SIGINT and SIGTERM, which every thread started after inherits, so
 * that only `serve_until_stopped` takes them; ignores SIGPIPE. */
static void block_stop_signals(sigset_t *stop) {
    sigemptyset(stop);
    sigaddset(stop, SIGINT);
    sigaddset(stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, stop, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Serves until SIGINT or SIGTERM: prints `listening` once `daemon` started,
 * then waits for a stop signal, stops the daemon and frees the answer.
 * Returns main's exit status: 1 when the daemon did not start. */
static int serve_until_stopped(const char *name, struct MHD_Daemon *daemon, unsigned short port, sigset_t *stop,
                               struct MHD_Response *canned, const char *listening) {
    if (daemon == NULL) {
        fprintf(stderr, "%s: cannot start on port %u\n", name, port);
        return 1;
    }
    printf("%s\n", listening);
    fflush(stdout);
    int received = 0;
    sigwait(stop, &received);
    MHD_stop_daemon(daemon);
    MHD_destroy_response(canned);
    return 0;
}

#endif
