// The context module's public entry: its routes, for the wiring (src/routes.ts).
export { contextRoutes } from './context.routes.js';
