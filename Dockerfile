# syntax=docker/dockerfile:1
#
# paystate's container image: one static binary on a distroless base, run
# as a non-root user, the bbolt file on the volume /var/lib/paystate.
#
#   docker build -t paystate --build-arg VERSION=$(git describe --tags --always --dirty) .
#   docker run -d --name paystate --stop-timeout 20 -p 127.0.0.1:8080:8080 -v paystate-data:/var/lib/paystate \
#     -e PAYSTATE_AUTH_API_KEYS=... \
#     -e PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY=sk_... \
#     -e PAYSTATE_PROVIDERS_STRIPE_WEBHOOK_SECRET=whsec_... \
#     paystate
#
# The image starts `paystate serve -config /etc/paystate/paystate.toml`
# with deploy/docker/paystate.toml there (Stripe, secrets from the
# environment); mount your own file over it for anything else.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# VERSION is what `paystate version` and paystate_build_info report (the
# variables the release build sets, .goreleaser.yaml); empty, they report
# "devel".
ARG VERSION=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w \
      -X github.com/paystate/paystate/cli.version=${VERSION} \
      -X github.com/paystate/paystate/internal/buildinfo.Injected=${VERSION}" \
      -o /out/paystate . \
    && mkdir -p /out/data

# busybox's wget, a static binary, is the HEALTHCHECK's HTTP client: the
# distroless base has no shell and no curl.
FROM busybox:1.37-musl AS busybox

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/paystate /usr/bin/paystate
COPY --from=busybox /bin/wget /usr/bin/wget
COPY deploy/docker/paystate.toml /etc/paystate/paystate.toml
# 65532 is the base image's "nonroot" user; the volume's directory is its
# own, so that a new named volume is writable.
COPY --from=build --chown=65532:65532 /out/data /var/lib/paystate
USER 65532:65532
WORKDIR /var/lib/paystate
VOLUME ["/var/lib/paystate"]
EXPOSE 8080
# /healthz answers 200 while the process serves. Its Host, 127.0.0.1:8080,
# is served whatever server.allowed_hosts says (IP addresses always are).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/bin/wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/healthz"]
# SIGTERM (docker stop) shuts down within server.shutdown_timeout (10s):
# give docker stop a longer --time than that if you raise it.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/paystate"]
CMD ["serve", "-config", "/etc/paystate/paystate.toml"]
