// The health module's public entry: its routes, for the wiring (src/app.ts).
export { healthRoutes } from './health.routes.js';
