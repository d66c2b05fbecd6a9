# The image `mur render --target kubernetes` names (docs/kubernetes.md). Two targets:
#
#   docker build -t murmur:0.1.0 .                       # mur alone, static, on distroless
#   docker build --target demo -t murmur-demo:0.1.0 .    # + bash and the offline harnesses
#
# The default image holds a static (musl) `mur`, its `mur-keeper` and nothing else: build your
# harness image FROM it (or copy /usr/local/bin/mur and mur-keeper into one), with the harness at
# the path your manifest names. A manifest is mounted at /etc/murmur/manifest.yaml, so a relative path in it resolves
# from /etc/murmur: the shipped `../../scripts/harness/lead.sh` is /scripts/harness/lead.sh,
# which is where the demo target puts it.

# ---- build: a static mur ----
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY capsule capsule
COPY supervisor supervisor
COPY tests tests
# musl links statically by default; the check fails the build if the binary is dynamic anyway
# (distroless static has no libc to load).
ENV CARGO_PROFILE_RELEASE_STRIP=true
RUN cargo build --release --locked --bin mur --bin mur-keeper \
 && ! ldd target/release/mur 2>/dev/null | grep -q '=>' \
 && ! ldd target/release/mur-keeper 2>/dev/null | grep -q '=>'

# ---- demo: the offline formations' harnesses (manifests/split) need bash ----
FROM debian:bookworm-slim AS demo
COPY --from=build /src/target/release/mur /src/target/release/mur-keeper /usr/local/bin/
COPY scripts/harness /scripts/harness
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mur"]
CMD ["capsule", "--listen", "0.0.0.0:8080"]

# ---- the default: mur on distroless static, as its nonroot user ----
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/release/mur /src/target/release/mur-keeper /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mur"]
CMD ["capsule", "--listen", "0.0.0.0:8080"]
