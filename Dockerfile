# The one gpupack image the chart runs: gpupack-extender, gpupack-agent, gpupack-webhook and
# gpupack-nri on PATH. Built from Debian 12 packages only, like the development machines:
#   docker build --build-arg GPUPACK_REVISION="$(git rev-parse --short=12 HEAD)" -t ghcr.io/gpupack/gpupack:0.1.0 .
# The build context has no .git, so the revision gpupack_build_info reports comes from the build
# argument ("unknown" without it).
FROM debian:bookworm AS build
ARG GPUPACK_REVISION=unknown
WORKDIR /src
# Go >= 1.26 for gpupack-nri (cgo against the C++ decision), where scripts/install-deps.sh looks.
COPY --from=golang:1.26-bookworm /usr/local/go /usr/local/go
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DGPUPACK_BUILD_BENCH=OFF -DGPUPACK_REVISION="${GPUPACK_REVISION}" \
 && cmake --build /build -j"$(nproc)" --target gpupack-extender gpupack-agent gpupack-webhook gpupack-sim gpupack-nri

FROM debian:bookworm-slim
# Runtime libraries of the binaries (cpp-httplib, OpenSSL, yaml-cpp, prometheus-cpp, simdjson).
# NVML is not here: the agent dlopens libnvidia-ml.so.1, which the NVIDIA container runtime mounts.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libcpp-httplib0.11 libssl3 libyaml-cpp0.7 libprometheus-cpp-core1.0 libsimdjson14 \
      libbrotli1 zlib1g ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/cmd/extender/gpupack-extender /build/cmd/agent/gpupack-agent \
     /build/cmd/webhook/gpupack-webhook /build/cmd/sim/gpupack-sim /build/agent/nri/gpupack-nri /usr/local/bin/
USER 65532:65532
ENTRYPOINT []
