/*
 * Glue between Swift and libmicrohttpd: non-variadic wrappers for the
 * variadic entry points Swift cannot call, and a logger trampoline that
 * formats MHD's printf-style messages. No logic beyond that.
 */
#ifndef RUNLOOPD_CMICROHTTPD_SHIM_H
#define RUNLOOPD_CMICROHTTPD_SHIM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <microhttpd.h>
#include <sys/epoll.h>

/** `MHD_SIZE_UNKNOWN` (not imported into Swift: it is a cast macro). */
static const uint64_t runloopd_mhd_size_unknown = MHD_SIZE_UNKNOWN;

/** `MHD_CONTENT_READER_END_OF_STREAM` as a plain constant. */
static const ssize_t runloopd_mhd_reader_end_of_stream = MHD_CONTENT_READER_END_OF_STREAM;

/** `MHD_CONTENT_READER_END_WITH_ERROR` as a plain constant. */
static const ssize_t runloopd_mhd_reader_end_with_error = MHD_CONTENT_READER_END_WITH_ERROR;

/** A formatted-message log sink: `fn(cls, message)`. */
typedef void (*runloopd_mhd_log_fn)(void *cls, const char *message);

/** Where the logger trampoline forwards; must outlive the daemon. */
struct runloopd_mhd_logger {
    runloopd_mhd_log_fn fn;
    void *cls;
};

/** `MHD_LogCallback` that formats the message and forwards it as one C string. */
static inline void runloopd_mhd_log_trampoline(void *cls, const char *fm, va_list ap) {
    const struct runloopd_mhd_logger *logger = (const struct runloopd_mhd_logger *)cls;
    char message[1024];
    if (logger == NULL || logger->fn == NULL || fm == NULL) {
        return;
    }
    vsnprintf(message, sizeof message, fm, ap);
    logger->fn(logger->cls, message);
}

/** Unescape callback that leaves URL and arguments exactly as sent. */
static inline size_t runloopd_mhd_unescape_nothing(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls;
    (void)connection;
    return strlen(s);
}

/**
 * `MHD_OPTION_URI_LOG_CALLBACK`: called once the request line is read, before
 * its query is parsed; its result becomes the request's context (runloopd
 * returns NULL).
 */
typedef void *(*runloopd_mhd_uri_log_fn)(void *cls, const char *uri, struct MHD_Connection *connection);

/**
 * Counts the query parameters of a request line's `uri` (1 + the `&`s after
 * the `?`; 0 without a query). When there are more than `limit`, cuts the
 * query off in place (MHD's own line buffer, which MHD itself cuts up next),
 * so MHD parses none of them and runs out of no memory, and returns the count.
 */
static inline unsigned int runloopd_mhd_cut_long_query(const char *uri, unsigned int limit) {
    char *query = (uri == NULL) ? NULL : strchr(uri, '?');
    unsigned int count = 0;
    if (query == NULL) {
        return 0;
    }
    count = 1;
    for (const char *c = query + 1; *c != '\0'; c++) {
        if (*c == '&') {
            count++;
        }
    }
    if (count > limit && query[1] != '\0') {
        query[1] = '\0';
    }
    return count;
}

/** The socket of a connection (`MHD_CONNECTION_INFO_CONNECTION_FD`), or -1. */
static inline int runloopd_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/** Everything `runloopd_mhd_start` passes to `MHD_start_daemon`. */
struct runloopd_mhd_start_options {
    unsigned int flags;
    const struct sockaddr *address;
    unsigned int thread_pool_size;
    unsigned int connection_limit;
    unsigned int per_ip_connection_limit;
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit;
    MHD_AccessHandlerCallback access_handler;
    void *access_handler_cls;
    MHD_RequestCompletedCallback request_completed;
    void *request_completed_cls;
    MHD_NotifyConnectionCallback notify_connection;
    void *notify_connection_cls;
    runloopd_mhd_uri_log_fn uri_log;
    void *uri_log_cls;
    struct runloopd_mhd_logger *logger;
};

/**
 * Non-variadic `MHD_start_daemon`. The port comes from `options->address`;
 * URLs and arguments are passed on undecoded (the caller decodes).
 */
static inline struct MHD_Daemon *runloopd_mhd_start(const struct runloopd_mhd_start_options *options) {
    struct MHD_OptionItem extra[2];
    unsigned int n = 0;
    if (options->thread_pool_size > 1) {
        extra[n].option = MHD_OPTION_THREAD_POOL_SIZE;
        extra[n].value = (intptr_t)options->thread_pool_size;
        extra[n].ptr_value = NULL;
        n++;
    }
    extra[n].option = MHD_OPTION_END;
    extra[n].value = 0;
    extra[n].ptr_value = NULL;
    return MHD_start_daemon(options->flags, 0, NULL, NULL,
                            options->access_handler, options->access_handler_cls,
                            MHD_OPTION_EXTERNAL_LOGGER, runloopd_mhd_log_trampoline, options->logger,
                            MHD_OPTION_NOTIFY_COMPLETED, options->request_completed,
                            options->request_completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, options->notify_connection,
                            options->notify_connection_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, options->uri_log, options->uri_log_cls,
                            MHD_OPTION_UNESCAPE_CALLBACK, runloopd_mhd_unescape_nothing, NULL,
                            MHD_OPTION_SOCK_ADDR, options->address,
                            MHD_OPTION_CONNECTION_LIMIT, options->connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, options->per_ip_connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, options->connection_timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, options->connection_memory_limit,
                            MHD_OPTION_ARRAY, extra,
                            MHD_OPTION_END);
}

/** The bound port of a running daemon (`MHD_DAEMON_INFO_BIND_PORT`), 0 if unknown. */
static inline uint16_t runloopd_mhd_bind_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/** The peer address of a connection (`MHD_CONNECTION_INFO_CLIENT_ADDRESS`), or NULL. */
static inline const struct sockaddr *runloopd_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/** A new epoll set (close-on-exec), or -1. */
static inline int runloopd_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

/**
 * Watches `fd` once for its peer's hang-up (`EPOLLRDHUP`; `EPOLLHUP` and
 * `EPOLLERR` always come too), reported as `id`. 0 on success, -1 otherwise.
 */
static inline int runloopd_epoll_watch_hangup(int epoll, int fd, uint64_t id) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = EPOLLRDHUP | EPOLLONESHOT;
    event.data.u64 = id;
    return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}

/** Takes up to `max` ready events' ids without waiting; their count (0 when none, -1 on error). */
static inline int runloopd_epoll_take(int epoll, uint64_t *ids, int max) {
    struct epoll_event events[64];
    int n = epoll_wait(epoll, events, max < 64 ? max : 64, 0);
    for (int i = 0; i < n; i++) {
        ids[i] = events[i].data.u64;
    }
    return n;
}

#endif
