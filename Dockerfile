# kubequota container image.
#
#   docker build -t REGISTRY/kubequota:0.1.0 .
#
# Build stage: Debian bookworm running the project's own make targets (`make deps`
# installs the Debian build dependencies and civetweb's source package, `make` builds
# bin/kubequota), so the image is built exactly as developers and CI build.
# Runtime stage: bookworm-slim with only the shared libraries bin/kubequota links
# (tests/chart/test_dockerfile.py checks this list against `readelf -d` and the targets
# against the Makefile), running as an unprivileged user.

FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends make ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make deps
# The context has no .git: scripts/image.sh passes the commit and its date (--version).
ARG KQ_COMMIT=unknown
ARG KQ_BUILD_DATE=unknown
RUN make KQ_COMMIT="$KQ_COMMIT" KQ_BUILD_DATE="$KQ_BUILD_DATE"

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libjansson4 libyaml-0-2 libcurl4 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 65532 kubequota \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin kubequota
COPY --from=build /src/bin/kubequota /usr/local/bin/kubequota
USER 65532:65532
# glibc keeps 7 freed blocks per size in each thread's cache by default; decoding a pod
# frees and reallocates ~140 small blocks, which then go through the slower shared bins.
# 256 per size: 1.6x the watch ingest of the informer alone (BENCHMARKS.md, finding 9).
ENV GLIBC_TUNABLES=glibc.malloc.tcache_count=256
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/kubequota"]
CMD ["--help"]
