# infrapulse container image: `docker build -t infrapulse .`
#   daemon:  docker run -v /sys:/host/sys:ro --network host infrapulse run --config /etc/infrapulse/infrapulse.yaml
#   demo:    docker run -p 9477:9477 infrapulse demo --listen 0.0.0.0:9477
# Pinned base image; the wheel is built in a throwaway stage so the runtime has no build tools.
FROM python:3.11.13-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY exporter ./exporter
# Wheels of infrapulse and every dependency, installed offline in the runtime stage.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.13-slim-bookworm
# A dedicated unprivileged user; the Kubernetes manifests run the same uid.
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin infrapulse
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels infrapulse && rm -rf /wheels
COPY deploy/config/node.yaml /etc/infrapulse/infrapulse.yaml
USER 10001:10001
EXPOSE 9477
HEALTHCHECK --interval=30s --timeout=3s CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9477/healthz', timeout=2)"]
ENTRYPOINT ["infrapulse"]
CMD ["run", "--config", "/etc/infrapulse/infrapulse.yaml"]
