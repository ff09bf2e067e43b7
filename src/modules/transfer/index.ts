// The transfer module's public entry: its routes, for the wiring (src/routes.ts).
export { transferRoutes } from './transfer.routes.js';
