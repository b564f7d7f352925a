# syntax=docker/dockerfile:1
# profile-service: build with the Swift toolchain image, run on a slim Debian with only the
# C libraries the binary links (libpq, libmemcached). Debian 12 (bookworm) in both stages so the
# runtime libraries are the ones the build linked against.
#
#   docker build -t profile-service .
#   docker run --rm profile-service serve --help

ARG SWIFT_VERSION=6.3

# ---- build ---------------------------------------------------------------------------------
FROM swift:${SWIFT_VERSION}-bookworm AS build
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends libpq-dev libmemcached-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so source edits do not refetch them.
COPY Package.* ./
RUN swift package resolve
COPY . .
RUN swift build -c release --product profile-service --static-swift-stdlib \
    && install -D -m 0755 "$(swift build -c release --show-bin-path)/profile-service" /out/profile-service

# ---- runtime -------------------------------------------------------------------------------
FROM debian:bookworm-slim AS runtime
# The source revision /metrics reports in profile_service_build_info:
#   docker build --build-arg REVISION=$(git rev-parse --short HEAD) -t profile-service .
ARG REVISION=unknown
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends libpq5 libmemcached11 ca-certificates tzdata curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home profile
WORKDIR /app
COPY --from=build /out/profile-service /usr/local/bin/profile-service
COPY migrations/ /app/migrations/
COPY openapi.yaml /app/openapi.yaml
ENV PROFILE_HOST=0.0.0.0 \
    PROFILE_PORT=8080 \
    PROFILE_MIGRATIONS_DIR=/app/migrations \
    PROFILE_BUILD_REVISION=${REVISION}
USER profile:profile
EXPOSE 8080
# Readiness: PostgreSQL reachable and not draining (the gateway stops routing on 503).
HEALTHCHECK --interval=5s --timeout=2s --start-period=10s --retries=3 \
    CMD curl -fsS -o /dev/null http://127.0.0.1:8080/readyz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["profile-service"]
CMD ["serve", "--host", "0.0.0.0"]
