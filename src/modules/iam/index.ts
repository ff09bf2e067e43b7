// The iam module's public entry: its routes, for the wiring (src/routes.ts).
export { iamRoutes } from './iam.routes.js';
