// The API 3.0 face's public entry: its routes, for the wiring (src/app.ts).
export { tencentApiRoutes } from './tc3.routes.js';
