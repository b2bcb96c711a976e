# runloopd container image.
#   docker build --build-arg COMMIT="$(git rev-parse --short=12 HEAD)" -t runloopd:0.1.0 .
#     (tag it with the version `runloopd --version` prints before the commit;
#      deploy/*.yaml pin that tag)
#   docker run --rm -p 8080:8080 -e RUNLOOPD_TOKEN="$(openssl rand -hex 32)" runloopd:0.1.0
# or, with the token in a file (a Docker/Compose secret mounts at /run/secrets/<name>):
#   docker run --rm -p 8080:8080 -v "$PWD/token:/run/secrets/runloopd_token:ro" \
#     -e RUNLOOPD_TOKEN_FILE=/run/secrets/runloopd_token runloopd:0.1.0
# It listens on 0.0.0.0, so without a token it refuses to start; RUNLOOPD_NO_AUTH=1
# (or --no-auth) runs it open on purpose. Browse it as http://localhost:8080/ or by
# IP; any other name the browser uses goes in RUNLOOPD_ALLOWED_HOST (comma-separated).
# The runtime stage is proven without a Docker engine by `make test-container`
# (a debootstrap'd bookworm root holding exactly RUNTIME_PACKAGES).

# ---- build: the official Swift 6.3 image on Debian bookworm ----
FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libmicrohttpd-dev libsqlite3-dev libpq-dev pkg-config make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Resolve packages before copying sources, so the dependency layer is cached.
COPY Package.swift ./
RUN swift package resolve
COPY Makefile ./
COPY scripts ./scripts
COPY Sources ./Sources
COPY Plugins ./Plugins
# The dashboard and the experiments are compiled into the binary (Plugins/EmbedFiles).
COPY Public ./Public
COPY experiments ./experiments
# The Makefile's release target: `swift build -c release --static-swift-stdlib`;
# stripped (its symbols are most of its size; crash reports still name frames by address).
# The commit `runloopd --version` names (the context has no .git).
ARG COMMIT=unknown
RUN make release COMMIT="${COMMIT}" && strip -o /runloopd .build/release/runloopd

# ---- runtime: bookworm-slim with only what the binary needs ----
FROM debian:bookworm-slim AS runtime
ARG RUNTIME_PACKAGES="libmicrohttpd12 libsqlite3-0 libpq5"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${RUNTIME_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin runloopd \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/runloopd
COPY --from=build /runloopd /usr/local/bin/runloopd
WORKDIR /srv/runloopd
# The history store (SQLite, WAL): mount a volume here to keep it across containers.
ENV RUNLOOPD_DATA_DIR=/var/lib/runloopd
VOLUME ["/var/lib/runloopd"]
USER 10001:10001
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/runloopd", "healthcheck", "--port", "8080"]
ENTRYPOINT ["/usr/local/bin/runloopd"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
