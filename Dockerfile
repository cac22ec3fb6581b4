# formsync container image.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t formsync .
#
# The build stage compiles a static binary (CGO_ENABLED=0: the SQLite driver is
# pure Go); the runtime stage is distroless: CA certificates for HTTPS to the
# API and BigQuery, a nonroot user, no shell, no package manager.
# deploy/dockerfile_test.go runs the `go build` line below verbatim and checks
# the binary is static, so keep it one RUN instruction.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/formsync/formsync/worker/formsapi.Version=${VERSION}" \
      -o /out/formsync ./cmd/formsync

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="formsync" \
      org.opencontainers.image.description="Copies form submissions into BigQuery, incrementally and exactly once" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/formsync /formsync
# Rows are staged as NDJSON here before a commit; Kubernetes mounts an emptyDir
# at /tmp because the root filesystem is read-only.
ENV FORMSYNC_TMP_DIR=/tmp
# /healthz, /readyz and /metrics of `formsync run` (FORMSYNC_HTTP_ADDR).
EXPOSE 9090
# 65532:65532, the distroless nonroot user.
USER nonroot:nonroot
ENTRYPOINT ["/formsync"]
CMD ["sync"]
