# syntax=docker/dockerfile:1

# Node 22, not 24: Node 24.21's JSON.parse can give an object key the text of an earlier one
# (README.md, "Known: Node 24.21's JSON.parse"), and the service parses every request body with it.
# Build stage: all dependencies, TypeScript compiled to dist/, the console built to console/dist.
FROM node:22-bookworm-slim AS build
WORKDIR /app
# The root is an npm workspace of clients/typescript: npm ci needs its package.json, and
# `npm run build` builds the client too. npm ci's `prepare` would build the console before its
# sources are here; it is built explicitly below.
COPY package.json package-lock.json ./
COPY clients/typescript/package.json ./clients/typescript/
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY console ./console
COPY clients/typescript/src ./clients/typescript/src
RUN npm run console:build
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY clients/typescript/tsconfig.json ./clients/typescript/
RUN npm run build

# Runtime stage: production dependencies, the compiled code and the SQL migrations only.
FROM node:22-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/app/data
WORKDIR /app
COPY package.json package-lock.json ./
COPY clients/typescript/package.json ./clients/typescript/
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
# dist/ and migrations/ must be siblings: dist/db/migrate.js reads ../../migrations.
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
# dist/http/console.js serves ../../console/dist.
COPY --from=build /app/console/dist ./console/dist
# Without DATABASE_URL the service keeps an embedded PGlite database here: mount a volume to keep
# it (`docker run -v sessions-data:/app/data …`). No VOLUME instruction: it would give every
# container an anonymous volume, unused and left behind when DATABASE_URL points at PostgreSQL.
RUN mkdir -p /app/data && chown node:node /app/data

USER node
EXPOSE 8080
# No curl in the slim image: Node's own fetch checks liveness.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Migrations first (under an advisory lock, so replicas may start together), then serve. `exec`
# makes the server PID 1's direct replacement so it receives SIGTERM and shuts down gracefully.
CMD ["sh", "-c", "node dist/cli/migrate.js && exec node dist/server.js"]
