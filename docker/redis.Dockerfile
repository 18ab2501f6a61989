# Debian's redis-server as an image, for machines without an image registry (this project's CI):
# `make image-test` and the compose check build it FROM the local Debian base. With a registry,
# use the official image instead (docker.io/library/redis:7-bookworm, compose.yaml's default);
# both run redis-server from PATH with its data in /data.
ARG BASE=docker.io/library/debian:bookworm-slim
FROM ${BASE}
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log \
    && install -d -o redis -g redis -m 0750 /data
USER redis
WORKDIR /data
VOLUME /data
EXPOSE 6379
CMD ["redis-server", "--appendonly", "yes", "--dir", "/data", "--protected-mode", "no"]
